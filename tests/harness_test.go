package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/testclock"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// Demo tokens (app.DefaultTokens).
const (
	tokenAcme   = "sk_test_acme"
	tokenGlobex = "sk_test_globex"
)

// env is the demo API on a real database behind a real HTTP server.
type env struct {
	t     testing.TB
	app   *app.App
	srv   *httptest.Server
	clock *testclock.Clock
}

// patient lets a request wait a minute for a lock, for a statement, for
// the provider and in all: a storm of requests on one row queues on its
// lock, and how long the last one waits depends on the machine's speed,
// not on what a test checks. The database still breaks a deadlock
// whatever the timeouts.
func patient(c *app.Config) {
	c.LockTimeout, c.Store.StatementTimeout, c.ProviderTimeout = time.Minute, time.Minute, time.Minute
	c.RequestDeadline = 2 * time.Minute
}

// losesAnswersQuickly ends a call whose answer the sandbox loses after
// 100 ms (the sandbox's MaxHang), while a call that answers has a minute:
// a provider timeout as short as the lost answer's would also cut a
// charge that a loaded machine wrote slowly.
func losesAnswersQuickly(c *app.Config) {
	c.ProviderTimeout, c.SandboxMaxHang, c.RequestDeadline = time.Minute, 100*time.Millisecond, 2*time.Minute
}

// newEnv starts the demo app on dsn; cfg may adjust the configuration.
func newEnv(t testing.TB, dsn string, cfg ...func(*app.Config)) *env {
	t.Helper()
	return newEnvWith(t, dsn, nil, cfg...)
}

// newEnvWith is newEnv whose requests carry the fail point function fp
// (internal/failpoint) when it is not nil.
func newEnvWith(t testing.TB, dsn string, fp failpoint.Func, cfg ...func(*app.Config)) *env {
	t.Helper()
	c := testclock.New(time.Now().UTC())
	conf := app.Config{DSN: dsn, Now: c.Now}
	for _, f := range cfg {
		f(&conf)
	}
	// The database clock of the POST fallback's records moves with c.
	db, err := app.Open(context.Background(), conf)
	if err != nil {
		t.Fatalf("app.Open: %v", err)
	}
	storetest.ShiftRecordClock(t, db, c.Offset)
	a, err := app.NewOn(context.Background(), db, conf)
	if err != nil {
		_ = db.Close()
		t.Fatalf("app.NewOn: %v", err)
	}
	handler := a.Handler()
	if fp != nil {
		handler = failpoint.Handler(handler, fp)
	}
	srv := httptest.NewServer(newSpecChecker(t, handler))
	t.Cleanup(func() {
		srv.Close()
		if err := a.Close(); err != nil {
			t.Errorf("app.Close: %v", err)
		}
	})
	return &env{t: t, app: a, srv: srv, clock: c}
}

// serveAsTheDemo serves e's handler as cmd/demo serves it, through
// server.New with cfg, on a real listener, and returns its address; the
// server is closed with the test.
func (e *env) serveAsTheDemo(cfg server.Config) string {
	e.t.Helper()
	srv, err := server.New(e.app.Handler(), cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
		_ = srv.Close()
	})
	return ln.Addr().String()
}

// response is a fully read HTTP response.
type response struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into a map.
func (r response) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("body is not a JSON object: %v: %s", err, r.Body)
	}
	return m
}

// Code returns the problem code of an error response.
func (r response) Code(t testing.TB) string {
	t.Helper()
	if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type = %q, want application/problem+json (status %d, body %s)", ct, r.Status, r.Body)
	}
	code, _ := r.JSON(t)["code"].(string)
	return code
}

// do sends a request; headers are name, value pairs, added to those
// already set. An empty token sends no Authorization header.
func (e *env) do(method, path, token string, body []byte, headers ...string) response {
	e.t.Helper()
	return e.doAt(e.srv.URL, method, path, token, body, headers...)
}

// doAt is [env.do] sent to the server at base.
func (e *env) doAt(base, method, path, token string, body []byte, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, base+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatalf("new request: %v", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Add(headers[i], headers[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		e.t.Fatalf("read body: %v", err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// count returns the number of rows of table matching where.
func (e *env) count(table, where string, args ...any) int64 {
	e.t.Helper()
	var n int64
	q := e.app.DB.Gorm.Table(table)
	if where != "" {
		q = q.Where(where, args...)
	}
	if err := q.Count(&n).Error; err != nil {
		e.t.Fatalf("count %s: %v", table, err)
	}
	return n
}

// serveInProcess sends one request as tenant acme straight to the handler,
// with no socket, for benchmarks: the figures are the engine's and the
// database's. Headers are name, value pairs.
func serveInProcess(h http.Handler, method, path string, body []byte, headers ...string) *httptest.ResponseRecorder {
	req := httptest.NewRequest(method, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+tokenAcme)
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	return rec
}

// wantReplay stops the test unless r repeats first byte for byte (status,
// body, stored headers) and is marked Idempotent-Replayed.
func wantReplay(t testing.TB, r, first response) {
	t.Helper()
	if r.Status != first.Status || !bytes.Equal(r.Body, first.Body) {
		t.Fatalf("replay differs:\n%d %s\nfirst %d %s", r.Status, r.Body, first.Status, first.Body)
	}
	if r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay is not marked Idempotent-Replayed: %v", r.Header)
	}
	for _, h := range []string{"Content-Type", "Location", "ETag", "Idempotency-Key", "Retry-After"} {
		if r.Header.Get(h) != first.Header.Get(h) {
			t.Fatalf("replayed %s = %q, first %q", h, r.Header.Get(h), first.Header.Get(h))
		}
	}
}

// wantStatus stops the test when r has another status.
func wantStatus(t testing.TB, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
}
