package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/retrysafe/retrysafe/wire"
)

func TestNewServerLimits(t *testing.T) {
	t.Parallel()
	srv, err := New(http.NotFoundHandler(), Config{IdleTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if srv.ReadHeaderTimeout != DefaultReadHeaderTimeout || srv.ReadTimeout != DefaultReadTimeout ||
		srv.WriteTimeout != DefaultWriteTimeout || srv.IdleTimeout != time.Second || srv.MaxHeaderBytes != DefaultMaxHeaderBytes {
		t.Fatalf("limits: %+v", srv)
	}
	if srv.WriteTimeout <= DefaultRequestDeadline {
		t.Fatal("the default write timeout would cut the 503 sent at the request deadline")
	}
	if _, err := New(http.NotFoundHandler(), Config{ReadTimeout: -1}); err == nil {
		t.Fatal("a negative timeout was accepted")
	}
}

func TestDeadlineAndDetach(t *testing.T) {
	t.Parallel()
	r := gin.New()
	r.RedirectTrailingSlash = false
	var got time.Time
	r.Use(Deadline(3 * time.Second))
	r.GET("/", func(c *gin.Context) {
		got, _ = c.Request.Context().Deadline()
		parent, cancel := context.WithCancel(c.Request.Context())
		detached, stop := Detach(parent, time.Hour)
		defer stop()
		cancel()
		if detached.Err() != nil {
			t.Errorf("the detached context ended with its parent")
		}
		if d, _ := detached.Deadline(); !d.Equal(got) {
			t.Errorf("detached deadline %v, want the request's %v", d, got)
		}
	})
	start := time.Now()
	r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/", nil))
	end := time.Now()
	if got.IsZero() || got.Before(start.Add(3*time.Second)) || got.After(end.Add(3*time.Second)) {
		t.Fatalf("request deadline %v after start (served in %v), want 3s after the request began", got.Sub(start), end.Sub(start))
	}
	ctx, stop := Detach(context.Background(), time.Minute)
	defer stop()
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > time.Minute {
		t.Fatalf("Detach without a deadline: %v %v", d, ok)
	}
}

type pingFunc func(context.Context) error

func (f pingFunc) PingContext(ctx context.Context) error { return f(ctx) }

func TestReadiness(t *testing.T) {
	t.Parallel()
	down := pingFunc(func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() })
	rec := httptest.NewRecorder()
	Readiness(down, 10*time.Millisecond, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" || rec.Header().Get("Content-Type") != wire.ContentTypeProblem {
		t.Fatalf("not ready: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
	rec = httptest.NewRecorder()
	Readiness(pingFunc(func(context.Context) error { return nil }), 0, nil).ServeHTTP(rec, httptest.NewRequest("GET", "/readyz", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("ready: %d %s", rec.Code, rec.Body)
	}
}

func TestStorableText(t *testing.T) {
	t.Parallel()
	r := gin.New()
	r.Use(StorableText())
	r.GET("/things/:id", func(c *gin.Context) { c.Status(http.StatusOK) })
	for target, want := range map[string]int{
		"/things/abc":          http.StatusOK,
		"/things/caf%C3%A9":    http.StatusOK,
		"/things/a%00":         http.StatusBadRequest,
		"/things/a%FF":         http.StatusBadRequest,
		"/things/a?q=%C3%28":   http.StatusBadRequest,
		"/things/a?q%00=1":     http.StatusBadRequest,
		"/things/a?q=ok&r=%E2": http.StatusBadRequest,
	} {
		rec := httptest.NewRecorder()
		r.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		if rec.Code != want {
			t.Errorf("%s: %d, want %d: %s", target, rec.Code, want, rec.Body)
		}
	}
}
