package server

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/internal/rawhttp"
	"github.com/retrysafe/retrysafe/wire"
)

// served counts the requests a handler ran, by path.
type served struct {
	mu    sync.Mutex
	paths map[string]int
}

func (s *served) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	s.mu.Lock()
	s.paths[r.URL.Path]++
	s.mu.Unlock()
	_, _ = fmt.Fprintf(w, "%s %q", r.URL.Path, body)
}

func (s *served) count(path string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.paths[path]
}

// serveRaw serves h with srv on a fresh listener, closed with the test,
// and returns its address.
func serveRaw(t *testing.T, srv *http.Server) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return ln.Addr().String()
}

// TestFramingNeverRunsASmuggledRequest sends over raw TCP a request with
// both Content-Length and Transfer-Encoding, and a request hidden after
// its body as net/http frames it: behind [New], and behind [Framing] on a
// server of the service's own, the first is answered with Connection:
// close, the connection is closed, and the hidden request never runs.
func TestFramingNeverRunsASmuggledRequest(t *testing.T) {
	t.Parallel()
	smuggled := "POST /smuggled HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}"
	for name, raw := range rawhttp.Smuggling("/first", "", "{}", smuggled) {
		for _, wrap := range []string{"New", "Framing"} {
			t.Run(name+"/"+wrap, func(t *testing.T) {
				t.Parallel()
				h := &served{paths: map[string]int{}}
				srv := &http.Server{Handler: Framing(h)}
				if wrap == "New" {
					var err error
					if srv, err = New(h, Config{}); err != nil {
						t.Fatal(err)
					}
				}
				got := rawhttp.Exchange(t, serveRaw(t, srv), raw)
				if n := h.count("/smuggled"); n != 0 {
					t.Fatalf("the smuggled request ran %d times", n)
				}
				if len(got) != 1 || h.count("/first") != 1 {
					t.Fatalf("%d responses, /first ran %d times; want one of each", len(got), h.count("/first"))
				}
				if !got[0].Close { // Connection: close (which ReadResponse removes from the header)
					t.Fatalf("the answer keeps the connection: %v", got[0].Header)
				}
			})
		}
	}
}

// TestFramingKeepsAConnectionOfKnownLengthBodies: requests that carry only
// Content-Length keep their connection, as do HTTP/1.1 requests without a
// body: Framing closes no more than it must.
func TestFramingKeepsAConnectionOfKnownLengthBodies(t *testing.T) {
	t.Parallel()
	h := &served{paths: map[string]int{}}
	srv, err := New(h, Config{})
	if err != nil {
		t.Fatal(err)
	}
	got := rawhttp.Exchange(t, serveRaw(t, srv), "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\n{}"+
		"GET /b HTTP/1.1\r\nHost: x\r\n\r\n"+
		"POST /c HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
	if len(got) != 3 || h.count("/a") != 1 || h.count("/b") != 1 || h.count("/c") != 1 {
		t.Fatalf("%d answers on one connection, ran /a %d, /b %d, /c %d times; want 3, once each", len(got), h.count("/a"), h.count("/b"), h.count("/c"))
	}
}

// TestFramingRefusesRepeatedSingletons: a singleton field sent twice with
// different values is 400 on every route, behind Framing and, for
// Authorization, behind RequireAuth alone; the handler never runs. The
// same value twice passes.
func TestFramingRefusesRepeatedSingletons(t *testing.T) {
	t.Parallel()
	auth, err := NewStaticTokens(map[string]string{"tok_a": "a", "tok_b": "b"})
	if err != nil {
		t.Fatal(err)
	}
	h := &served{paths: map[string]int{}}
	router := gin.New()
	router.Use(RequireAuth(auth, nil))
	router.Any("/auth", gin.WrapH(h))
	framed := serveRaw(t, &http.Server{Handler: Framing(h)})
	authOnly := serveRaw(t, &http.Server{Handler: router})
	for _, c := range []struct {
		addr, path, field, first, second, code string
	}{
		{framed, "/any", wire.HeaderAuthorization, "Bearer tok_a", "Bearer tok_b", "validation_failed"},
		{framed, "/any", wire.HeaderIdempotencyKey, "k1", "k2", "idempotency_key_invalid"},
		{framed, "/any", wire.HeaderXIdempotencyKey, "k1", "k2", "idempotency_key_invalid"},
		{framed, "/any", wire.HeaderIfMatch, `"1"`, `"2"`, "validation_failed"},
		{framed, "/any", wire.HeaderContentType, "application/json", "text/plain", "validation_failed"},
		{authOnly, "/auth", wire.HeaderAuthorization, "Bearer tok_b", "Bearer tok_a", "validation_failed"},
	} {
		ran := h.count(c.path)
		raw := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%s: %s\r\n%s: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", c.path, c.field, c.first, c.field, c.second)
		got := rawhttp.Exchange(t, c.addr, raw)
		if len(got) != 1 || got[0].Status != http.StatusBadRequest || got[0].Header.Get("Content-Type") != wire.ContentTypeProblem {
			t.Fatalf("%s twice on %s: %s, want one 400 problem", c.field, c.path, statuses(got))
		}
		var p wire.Problem
		if err := json.Unmarshal(got[0].Body, &p); err != nil || string(p.Code) != c.code || !got[0].Close {
			t.Fatalf("%s twice on %s: %s (Connection: close %v), want code %s", c.field, c.path, got[0].Body, got[0].Close, c.code)
		}
		if h.count(c.path) != ran {
			t.Fatalf("%s twice: the handler ran", c.field)
		}
		same := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: x\r\n%s: %s\r\n%s: %s\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}", c.path, c.field, c.first, c.field, c.first)
		if got := rawhttp.Exchange(t, c.addr, same); len(got) != 1 || got[0].Status != http.StatusOK {
			t.Fatalf("%s twice with one value on %s: %s, want one 200", c.field, c.path, statuses(got))
		}
	}
	if h.count("/any") != 5 || h.count("/auth") != 1 {
		t.Fatalf("the same value twice ran /any %d, /auth %d times; want 5, 1", h.count("/any"), h.count("/auth"))
	}
}

func statuses(rs []rawhttp.Response) string {
	s := fmt.Sprintf("%d answers", len(rs))
	for _, r := range rs {
		s += fmt.Sprintf(" %d %s", r.Status, r.Header.Get("Content-Type"))
	}
	return s
}
