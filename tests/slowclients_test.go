package tests

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// serveWithLimits serves the demo on a real listener through
// server.New with cfg, and returns its address.
func serveWithLimits(t *testing.T, cfg server.Config) (string, *env) {
	t.Helper()
	e := newEnv(t, testdb.New(t, "sqlite"))
	return e.serveAsTheDemo(cfg), e
}

// waitClosed reads from c until the server closes it and returns how long
// that took; past limit it gives up and reports limit.
func waitClosed(c net.Conn, limit time.Duration) time.Duration {
	start := time.Now()
	_ = c.SetReadDeadline(start.Add(limit))
	_, err := io.Copy(io.Discard, c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return limit
	}
	return time.Since(start)
}

// TestSlowClientsDoNotStarveTheServer opens 500 connections that hold the
// server the ways a slow or hostile client does (a body sent a byte at a
// time, a declared body never sent without a token, nothing sent at all, a
// keep-alive left idle), checks that normal requests are served meanwhile,
// and that every one of those connections is closed by the server within
// its timeout, having stored nothing.
func TestSlowClientsDoNotStarveTheServer(t *testing.T) {
	t.Parallel()
	cfg := server.Config{
		ReadHeaderTimeout: 500 * time.Millisecond,
		ReadTimeout:       time.Second,
		// Long enough for a normal request on a loaded machine: the
		// connections held here are closed by the read and idle timeouts.
		WriteTimeout: time.Minute,
		IdleTimeout:  time.Second,
	}
	addr, e := serveWithLimits(t, cfg)
	const perKind = 125
	kinds := []struct {
		name  string
		start func(c net.Conn, i int)
	}{
		{"slow body", func(c net.Conn, i int) {
			fmt.Fprintf(c, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nIdempotency-Key: slow-%d\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{", tokenAcme, i)
			go func() {
				for {
					time.Sleep(100 * time.Millisecond)
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
		}},
		{"declared body never sent, no token", func(c net.Conn, i int) {
			fmt.Fprintf(c, "POST /v1/payments HTTP/1.1\r\nHost: x\r\nIdempotency-Key: unauth-%d\r\nContent-Length: 100000\r\n\r\n", i)
		}},
		{"nothing sent", func(net.Conn, int) {}},
		{"idle keep-alive", func(c net.Conn, _ int) {
			fmt.Fprint(c, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
		}},
	}
	type held struct {
		kind string
		conn net.Conn
	}
	var conns []held
	for _, k := range kinds {
		for i := range perKind {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatalf("dial %d: %v", len(conns), err)
			}
			t.Cleanup(func() { c.Close() })
			k.start(c, i)
			conns = append(conns, held{k.name, c})
		}
	}

	// Normal clients are served while the 500 connections are open.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for range 10 {
		req, _ := http.NewRequest("PUT", "http://"+addr+orderPath(uuid.New()), bytes.NewReader(orderBody(1, "1.00")))
		req.Header.Set("Authorization", "Bearer "+tokenAcme)
		res, err := client.Do(req)
		if err != nil {
			t.Fatalf("a normal request while slow clients hold connections: %v", err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusCreated {
			t.Fatalf("a normal request while slow clients hold connections: %d", res.StatusCode)
		}
	}

	// Every held connection is closed by the server within its timeout
	// (ReadTimeout is the longest that applies), plus slack for 500 of them
	// on a loaded machine: a connection the server never closes still
	// fails the test.
	limit := cfg.ReadTimeout + cfg.IdleTimeout + 20*time.Second
	var wg sync.WaitGroup
	var mu sync.Mutex
	open := map[string]int{}
	for _, h := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if waitClosed(h.conn, limit) >= limit {
				mu.Lock()
				open[h.kind]++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(open) > 0 {
		t.Fatalf("connections still open after %v: %v", limit, open)
	}
	if n := e.count("idempotency_records", ""); n != 0 {
		t.Fatalf("slow or unauthenticated requests left %d idempotency records", n)
	}
	if n := e.count("orders", ""); n != 10 {
		t.Fatalf("orders = %d, want the 10 normal ones", n)
	}
}

// TestUnauthenticatedRequestIsAnsweredWithoutItsBody: a request without a
// valid token that declares a body and never sends it gets its 401 at
// once, with Connection: close, and the server closes the connection
// without waiting for the body (the read timeout here is long).
func TestUnauthenticatedRequestIsAnsweredWithoutItsBody(t *testing.T) {
	t.Parallel()
	addr, _ := serveWithLimits(t, server.Config{ReadTimeout: time.Minute, WriteTimeout: time.Minute})
	for _, token := range []string{"", "Authorization: Bearer sk_wrong\r\n"} {
		for _, length := range []int{10, 10 << 20} {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			fmt.Fprintf(c, "POST /v1/payments HTTP/1.1\r\nHost: x\r\n%sIdempotency-Key: k\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n{", token, length)
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			res, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer to an unauthenticated request whose body is not sent (token %q, length %d): %v", token, length, err)
			}
			res.Body.Close()
			if res.StatusCode != http.StatusUnauthorized || !res.Close {
				t.Fatalf("answer %d %v, want 401 with Connection: close", res.StatusCode, res.Header)
			}
			if took := waitClosed(c, 10*time.Second); took >= 10*time.Second {
				t.Fatalf("the connection stayed open after the 401 (token %q, length %d)", token, length)
			}
		}
	}
}
