package framework_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

// codesEngine returns an engine on a fresh SQLite database.
func codesEngine(t *testing.T) *framework.Engine {
	t.Helper()
	db, err := store.Open(context.Background(), testdb.New(t, "sqlite"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	engine, err := framework.NewEngine(db, framework.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return engine
}

func TestRegisterCodes(t *testing.T) {
	t.Parallel()
	engine := codesEngine(t)
	funds := wire.CodeInfo{Code: "insufficient_funds", Status: http.StatusUnprocessableEntity, Title: "Insufficient funds"}
	if err := engine.RegisterCodes(funds); err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterCodes(funds); err != nil {
		t.Fatalf("registering the same code again: %v", err)
	}
	if info, ok := engine.Codes().Lookup("insufficient_funds"); !ok || info != funds {
		t.Fatalf("Lookup = %+v, %v", info, ok)
	}
	conflicts := []wire.CodeInfo{
		{Code: "insufficient_funds", Status: http.StatusPaymentRequired, Title: "Insufficient funds"},
		{Code: "insufficient_funds", Status: http.StatusUnprocessableEntity, Title: "Not enough money"},
		{Code: wire.CodeNotFound, Status: http.StatusGone, Title: "Gone"},
	}
	for _, c := range conflicts {
		if err := engine.RegisterCodes(c); !errors.Is(err, framework.ErrCodeConflict) {
			t.Fatalf("RegisterCodes(%+v) = %v, want ErrCodeConflict", c, err)
		}
	}
	invalid := []wire.CodeInfo{
		{Code: "Bad Code", Status: 422, Title: "x"},
		{Code: "teapot", Status: 200, Title: "x"},
		{Code: "final_retry", Status: 402, Title: "x", Retryable: true},
	}
	for _, c := range invalid {
		if err := engine.RegisterCodes(c); err == nil {
			t.Fatalf("RegisterCodes(%+v) = nil, want an error", c)
		}
	}
	// A batch with one bad entry registers none of it.
	if err := engine.RegisterCodes(wire.CodeInfo{Code: "first_ok", Status: 409, Title: "x"},
		wire.CodeInfo{Code: "first_ok", Status: 410, Title: "x"}); !errors.Is(err, framework.ErrCodeConflict) {
		t.Fatalf("conflicting batch: %v", err)
	}
	if _, ok := engine.Codes().Lookup("first_ok"); ok {
		t.Fatal("a failed batch registered a code")
	}
	if _, ok := engine.Codes().Lookup("card_declined"); ok {
		t.Fatal("card_declined is known to a bare engine; it belongs to payments")
	}
}

// TestRetryAfterOnExactlyTheRetryableAnswers walks every code of the
// registry: Retry-After on the answers a client may retry with the same ID
// or key, never on a final one, even when the error sets one.
func TestRetryAfterOnExactlyTheRetryableAnswers(t *testing.T) {
	t.Parallel()
	engine := codesEngine(t)
	if err := engine.RegisterCodes(
		wire.CodeInfo{Code: "insufficient_funds", Status: 422, Title: "Insufficient funds"},
		wire.CodeInfo{Code: "ledger_busy", Status: 409, Title: "Ledger busy", Retryable: true},
		wire.CodeInfo{Code: "maintenance", Status: 503, Title: "Maintenance", Retryable: true},
	); err != nil {
		t.Fatal(err)
	}
	all := engine.Codes().All()
	if len(all) != len(wire.Generic())+3 {
		t.Fatalf("registry holds %d codes", len(all))
	}
	for _, info := range all {
		for _, err := range []error{
			framework.Errorf(info.Code, "detail"),
			&framework.Error{Code: info.Code, RetryAfter: 5 * time.Second},
		} {
			status, h, body := engine.RenderProblem(err)
			if status != info.Status {
				t.Fatalf("%s: status %d, want %d", info.Code, status, info.Status)
			}
			if got := h.Get("Retry-After") != ""; got != info.Retryable {
				t.Fatalf("%s: Retry-After %q, retryable %v", info.Code, h.Get("Retry-After"), info.Retryable)
			}
			if got := h.Get("WWW-Authenticate"); (status == 401) != (got == "Bearer") {
				t.Fatalf("%s: WWW-Authenticate %q", info.Code, got)
			}
			var p wire.Problem
			if err := json.Unmarshal(body, &p); err != nil || p.Code != info.Code || p.Status != status || p.Title != info.Title ||
				p.Type != wire.ProblemType(info.Code) || h.Get("Content-Type") != wire.ContentTypeProblem {
				t.Fatalf("%s: body %s (%v)", info.Code, body, err)
			}
		}
	}
	_, h, _ := engine.RenderProblem(&framework.Error{Code: wire.CodeUnavailable, RetryAfter: 5 * time.Second})
	if h.Get("Retry-After") != "5" {
		t.Fatalf("Retry-After = %q, want the error's 5", h.Get("Retry-After"))
	}
	// The store's own failures map to retryable answers: in progress only
	// for a wait on the request's own key.
	for err, want := range map[error]string{
		store.ErrLockTimeout: "unavailable",
		fmt.Errorf("%w: %w", store.ErrLockTimeout, store.ErrBusy):                  "unavailable",
		store.KeyLocked(store.ErrLockTimeout):                                      "request_in_progress",
		store.KeyLocked(fmt.Errorf("%w: %w", store.ErrLockTimeout, store.ErrBusy)): "unavailable",
		store.ErrUnavailable:     "unavailable",
		context.DeadlineExceeded: "unavailable",
	} {
		status, h, body := engine.RenderProblem(err)
		var p wire.Problem
		if err := json.Unmarshal(body, &p); err != nil || string(p.Code) != want || (status != 409 && status != 503) ||
			h.Get("Retry-After") != "1" || strings.Contains(string(body), "same ID or key") {
			t.Fatalf("%v: %d %v %s, want %s", err, status, h, body, want)
		}
	}
}

func TestUnregisteredCodeIsAServerBug(t *testing.T) {
	t.Parallel()
	engine := codesEngine(t)
	status, h, body := engine.RenderProblem(framework.Errorf("never_registered", "secret detail"))
	if status != http.StatusInternalServerError || h.Get("Retry-After") != "" ||
		strings.Contains(string(body), "never_registered") || strings.Contains(string(body), "secret") {
		t.Fatalf("%d %v %s", status, h, body)
	}
	// The engine-less writer knows the generic codes only.
	if status, _, _ := framework.RenderProblem(framework.Errorf(wire.CodeNotFound, "x")); status != 404 {
		t.Fatalf("generic code through RenderProblem: %d", status)
	}
}

func TestReadBodyContentType(t *testing.T) {
	t.Parallel()
	b, err := framework.NewBinder(framework.BinderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for ct, want := range map[string]error{
		"":                                  nil,
		"application/json":                  nil,
		"application/json; charset=utf-8":   nil,
		"application/merge-patch+json":      nil,
		"text/plain":                        framework.ErrUnsupportedMediaType,
		"application/x-www-form-urlencoded": framework.ErrUnsupportedMediaType,
		"application/xml":                   framework.ErrUnsupportedMediaType,
	} {
		r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(`{"a":1}`))
		if ct != "" {
			r.Header.Set("Content-Type", ct)
		}
		_, err := b.ReadBody(r)
		if (want == nil) != (err == nil) || (want != nil && !errors.Is(err, want)) {
			t.Fatalf("Content-Type %q: %v, want %v", ct, err, want)
		}
	}
}

// TestRouterHelpers serves a plain gin router over real HTTP: unknown
// routes and methods answer problems, a 401 names its scheme and a 405 the
// methods the path has.
func TestRouterHelpers(t *testing.T) {
	t.Parallel()
	gin.SetMode(gin.TestMode)
	auth, err := server.NewStaticTokens(map[string]string{"tok": "acme"})
	if err != nil {
		t.Fatal(err)
	}
	router := gin.New()
	server.UseProblemHandlers(router, nil)
	v1 := router.Group("/v1", server.RequireAuth(auth, nil))
	v1.GET("/things", func(c *gin.Context) {
		tenant, ok := server.Tenant(c, nil)
		if ok {
			c.String(http.StatusOK, tenant)
		}
	})
	v1.GET("/panic", func(*gin.Context) { panic("boom") })
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)

	do := func(method, path, token string) (*http.Response, wire.Problem, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		res, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		var p wire.Problem
		_ = json.Unmarshal(body, &p)
		return res, p, string(body)
	}
	res, _, body := do(http.MethodGet, "/v1/things", "tok")
	if res.StatusCode != 200 || body != "acme" {
		t.Fatalf("authenticated GET: %d %s", res.StatusCode, body)
	}
	cases := []struct {
		method, path, token string
		status              int
		code                wire.Code
	}{
		{http.MethodGet, "/v1/things", "", 401, wire.CodeUnauthenticated},
		{http.MethodGet, "/v1/things", "wrong", 401, wire.CodeUnauthenticated},
		{http.MethodGet, "/nowhere", "", 404, wire.CodeNotFound},
		{http.MethodDelete, "/v1/things", "tok", 405, wire.CodeMethodNotAllowed},
		{http.MethodGet, "/v1/panic", "tok", 500, wire.CodeInternal},
	}
	for _, c := range cases {
		res, p, body := do(c.method, c.path, c.token)
		if res.StatusCode != c.status || p.Code != c.code || res.Header.Get("Content-Type") != wire.ContentTypeProblem {
			t.Fatalf("%s %s: %d %s", c.method, c.path, res.StatusCode, body)
		}
		if (c.status == 401) != (res.Header.Get("WWW-Authenticate") == "Bearer") {
			t.Fatalf("%s %s: WWW-Authenticate %q", c.method, c.path, res.Header.Get("WWW-Authenticate"))
		}
		if strings.Contains(body, "boom") {
			t.Fatalf("the panic value leaked: %s", body)
		}
		if allow := res.Header.Get("Allow"); (c.status == 405) != (allow == "GET") {
			t.Fatalf("%s %s: Allow %q (a 405 names the path's methods: RFC 9110 section 15.5.6)", c.method, c.path, allow)
		}
	}
}
