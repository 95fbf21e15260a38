package rawhttp

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
)

// Response is one answer read from the connection.
type Response struct {
	Status int
	Header http.Header
	// Close reports that the answer said Connection: close (or was an
	// HTTP/1.0 answer without keep-alive).
	Close bool
	Body  []byte
}

// Exchange writes raw to a new connection to addr and returns every
// response the server sends until it closes the connection (an EOF, or
// a reset when it closed with bytes unread).
func Exchange(tb testing.TB, addr, raw string) []Response {
	tb.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		tb.Fatal(err)
	}
	defer conn.Close()
	if _, err := io.WriteString(conn, raw); err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReader(conn)
	var got []Response
	for {
		res, err := http.ReadResponse(br, nil)
		if err != nil {
			return got
		}
		body, err := io.ReadAll(res.Body)
		res.Body.Close()
		if err != nil {
			tb.Fatalf("read the body of answer %d: %v", len(got)+1, err)
		}
		got = append(got, Response{Status: res.StatusCode, Header: res.Header, Close: res.Close, Body: body})
	}
}

// Smuggling returns, by name, the ways to hide smuggled (a whole raw
// request) in the body of a request "POST path" with the header lines
// fields (each ending in CRLF) and body, as one reader of its framing
// sees it and not as net/http does:
//
//   - "CL.TE": Content-Length counts body, chunked, and smuggled, so a
//     front end that frames by Content-Length sees one request; net/http
//     reads the chunks and then smuggled as a second request.
//   - "CL.TE, Transfer-Encoding first": the same with the fields the
//     other way round.
//   - "TE.CL, HTTP/1.0": an HTTP/1.0 request with keep-alive whose chunks
//     hold smuggled; net/http drops the Transfer-Encoding of HTTP/1.0 and
//     reads only the chunk size line, by Content-Length, as the body.
//
// Send smuggled with Connection: close, so that a server that runs it
// closes the connection after answering it.
func Smuggling(path, fields, body, smuggled string) map[string]string {
	chunked := fmt.Sprintf("%x\r\n%s\r\n0\r\n\r\n", len(body), body)
	size := fmt.Sprintf("%x\r\n", len(smuggled))
	head := "POST " + path + " HTTP/1.1\r\nHost: rawhttp\r\n" + fields
	return map[string]string{
		"CL.TE": fmt.Sprintf("%sContent-Length: %d\r\nTransfer-Encoding: chunked\r\n\r\n%s%s",
			head, len(chunked)+len(smuggled), chunked, smuggled),
		"CL.TE, Transfer-Encoding first": fmt.Sprintf("%sTransfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n%s%s",
			head, len(chunked)+len(smuggled), chunked, smuggled),
		"TE.CL, HTTP/1.0": fmt.Sprintf("POST %s HTTP/1.0\r\nHost: rawhttp\r\nConnection: keep-alive\r\n%sTransfer-Encoding: chunked\r\nContent-Length: %d\r\n\r\n%s%s\r\n0\r\n\r\n",
			path, fields, len(size), size, smuggled),
	}
}
