package server

import (
	"net/http"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// singletonFields are the request fields of one value that the framework
// reads (RFC 9110 §5.3): sent twice with different values, a proxy that
// reads one and a server that reads the other see two requests. Read only.
var singletonFields = [...]string{
	wire.HeaderAuthorization,
	wire.HeaderIdempotencyKey,
	wire.HeaderXIdempotencyKey,
	wire.HeaderIfMatch,
	wire.HeaderContentType,
}

// Framing returns h behind the rules of request framing that net/http
// leaves to the application, so that every reader of a request (a proxy,
// a WAF, an audit log, the handler) sees the same request:
//
//   - The connection of a request whose body came chunked
//     (Transfer-Encoding: chunked), and of every HTTP/1.0 request, is
//     closed after its answer (Connection: close). A request that carries
//     both Content-Length and Transfer-Encoding is framed one way by a
//     front end and another way by the server; RFC 9112 §6.1 says the
//     server MUST close the connection after answering it, so that the
//     bytes after the body as the server read it never run as a second
//     request (request smuggling).
//   - A singleton field (Authorization, Idempotency-Key or its alias
//     X-Idempotency-Key, If-Match, Content-Type) sent more than once with
//     different values is refused before h runs and before the body is
//     read: 400 idempotency_key_invalid for a key, 400 validation_failed
//     naming the field for the others, and the connection is closed.
//
// Why every chunked request: given both fields, net/http reads the body
// by chunks and deletes Content-Length before any handler runs (and it
// drops the Transfer-Encoding of an HTTP/1.0 request, whose body it reads
// by Content-Length), so no handler can tell a request that carried both
// from one that did not. Telling them apart at the connection would take
// a second HTTP/1 parser in front of net/http's, and two parsers that
// disagree are what smuggling feeds on. Closing after every chunked
// request is a superset of what RFC 9112 asks: it costs a client that
// streams a body of unknown length a new connection per request, while
// a body sent whole (retrysafe's client, any JSON of known length)
// carries Content-Length and keeps its connection. HTTP/2 requests have
// no Transfer-Encoding and keep theirs.
//
// [New] serves its handler behind Framing. A service that builds its own
// *http.Server (a chi or net/http router with the framework's gin engine
// mounted in it) wraps its root handler, so that every route of the
// process is covered:
//
//	srv := &http.Server{Handler: server.Framing(mux)}
//
// Framing of a handler already behind Framing returns it unchanged.
func Framing(h http.Handler) http.Handler {
	if f, ok := h.(framing); ok {
		return f
	}
	return framing{next: h}
}

type framing struct{ next http.Handler }

func (f framing) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if len(r.TransferEncoding) > 0 || (r.ProtoMajor == 1 && r.ProtoMinor == 0) {
		w.Header().Set("Connection", "close")
	}
	for _, name := range singletonFields {
		if repeated(r.Header, name) {
			refuseRepeated(w, r, name)
			return
		}
	}
	f.next.ServeHTTP(w, r)
}

// repeated reports whether h holds the field name more than once with
// different values.
func repeated(h http.Header, name string) bool {
	values := h[name]
	for _, v := range values[min(1, len(values)):] {
		if v != values[0] {
			return true
		}
	}
	return false
}

// refuseRepeated answers a request that sent the singleton field name
// twice with different values: 400, without reading its body, and closes
// the connection.
func refuseRepeated(w http.ResponseWriter, r *http.Request, name string) {
	detail := name + " is sent more than once with different values"
	var err error = &framework.Error{Code: wire.CodeValidationFailed, Detail: detail,
		Fields: []wire.FieldError{{Field: name, Reason: "sent more than once with different values"}}}
	if name == wire.HeaderIdempotencyKey || name == wire.HeaderXIdempotencyKey {
		err = framework.Errorf(wire.CodeIdempotencyKeyInvalid, "%s", detail)
	}
	closeWithoutReading(w)
	framework.WriteProblem(w, r, nil, err)
}
