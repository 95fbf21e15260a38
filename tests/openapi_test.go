package tests

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/retrysafe/retrysafe/wire"
)

// contractHeaders are the response headers of the retrysafe contract: an
// answer may carry one only where the description declares it.
var contractHeaders = []string{"Idempotency-Key", "Idempotent-Replayed", "Location", "ETag", "Retry-After",
	"Deprecation", "Link", "Sunset", "WWW-Authenticate"}

// contractRequestHeaders are the request headers whose meaning the
// description declares per operation.
var contractRequestHeaders = []string{"Idempotency-Key", "X-Idempotency-Key", "If-Match", "If-None-Match"}

// specChecker validates every exchange with the demo under /v1 against the
// OpenAPI document the demo serves: the request (unless the server refused
// it with a 4xx, as it should refuse an invalid one), the response's
// status, body and headers. Violations fail the test at its end.
type specChecker struct {
	t      testing.TB
	next   http.Handler
	router routers.Router

	mu         sync.Mutex
	violations []string
	checked    int
	seen       map[string]bool // "METHOD /path/{template} status" of every described answer
}

// newSpecChecker loads the document next serves at /openapi.json.
func newSpecChecker(t testing.TB, next http.Handler) *specChecker {
	t.Helper()
	doc := loadServedSpec(t, next)
	router, err := legacy.NewRouter(doc)
	if err != nil {
		t.Fatalf("openapi router: %v", err)
	}
	sc := &specChecker{t: t, next: next, router: router, seen: map[string]bool{}}
	t.Cleanup(func() {
		sc.mu.Lock()
		defer sc.mu.Unlock()
		for _, v := range sc.violations {
			t.Errorf("OpenAPI: %s", v)
		}
	})
	return sc
}

// servedSpec returns the document h serves at /openapi.json.
func servedSpec(t testing.TB, h http.Handler) []byte {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK || !strings.HasPrefix(rec.Header().Get("Content-Type"), "application/json") {
		t.Fatalf("GET /openapi.json: %d %s", rec.Code, rec.Header().Get("Content-Type"))
	}
	return rec.Body.Bytes()
}

// loadServedSpec fetches /openapi.json from h, parses it and validates it
// as an OpenAPI 3.1 document.
func loadServedSpec(t testing.TB, h http.Handler) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(servedSpec(t, h))
	if err != nil {
		t.Fatalf("parse /openapi.json: %v", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("/openapi.json is not a valid OpenAPI document: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() || doc.OpenAPI != "3.1.0" {
		t.Fatalf("/openapi.json is OpenAPI %q, want 3.1.0", doc.OpenAPI)
	}
	return doc
}

func (sc *specChecker) violation(format string, args ...any) {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	sc.violations = append(sc.violations, fmt.Sprintf(format, args...))
}

func (sc *specChecker) count() int {
	sc.mu.Lock()
	defer sc.mu.Unlock()
	return sc.checked
}

func (sc *specChecker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !strings.HasPrefix(r.URL.Path, "/v1/") && r.URL.Path != "/v1" {
		sc.next.ServeHTTP(w, r)
		return
	}
	reqBody, _ := io.ReadAll(r.Body)
	r.Body = io.NopCloser(bytes.NewReader(reqBody))
	rec := httptest.NewRecorder()
	sc.next.ServeHTTP(rec, r)
	sc.check(r, reqBody, rec)

	for k, v := range rec.Header() {
		w.Header()[k] = v
	}
	w.WriteHeader(rec.Code)
	_, _ = w.Write(rec.Body.Bytes())
}

func (sc *specChecker) check(r *http.Request, reqBody []byte, rec *httptest.ResponseRecorder) {
	sc.mu.Lock()
	sc.checked++
	sc.mu.Unlock()
	what := fmt.Sprintf("%s %s → %d", r.Method, r.URL.Path, rec.Code)
	vr := r.Clone(context.Background())
	vr.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, err := sc.router.FindRoute(vr)
	if err != nil {
		if rec.Code != http.StatusNotFound && rec.Code != http.StatusMethodNotAllowed {
			sc.violation("%s: the route is not described (%v)", what, err)
		}
		return
	}
	if ct := vr.Header.Get("Content-Type"); len(reqBody) > 0 && (ct == "" || wire.IsJSONMediaType(ct)) && !declaresMediaType(route.Operation, ct) {
		// The contract accepts a JSON body without a Content-Type, and any
		// application/*+json type, which OpenAPI has no media range for.
		vr.Header.Set("Content-Type", "application/json")
	}
	sc.mu.Lock()
	if sc.seen != nil {
		sc.seen[fmt.Sprintf("%s %s %d", route.Method, route.Path, rec.Code)] = true
	}
	sc.mu.Unlock()
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc, IncludeResponseStatus: true, MultiError: true}
	in := &openapi3filter.RequestValidationInput{Request: vr, PathParams: params, Route: route, Options: opts}
	if err := openapi3filter.ValidateRequest(context.Background(), in); err != nil && (rec.Code < 400 || rec.Code > 499) {
		sc.violation("%s: the request does not match the description but was not refused: %v", what, err)
	}
	for _, h := range contractRequestHeaders {
		// As for the request itself: a header the route does not read is
		// a client's mistake only where the server did not refuse the
		// request anyway.
		if r.Header.Get(h) != "" && (rec.Code < 400 || rec.Code > 499) &&
			route.Operation.Parameters.GetByInAndName(openapi3.ParameterInHeader, h) == nil {
			sc.violation("%s: request header %s is not declared", what, h)
		}
	}
	out := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: rec.Code,
		Header: rec.Header(), Body: io.NopCloser(bytes.NewReader(rec.Body.Bytes())), Options: opts}
	if err := openapi3filter.ValidateResponse(context.Background(), out); err != nil {
		sc.violation("%s: %v; body %s", what, err, truncate(rec.Body.Bytes()))
	}
	if resp := route.Operation.Responses.Status(rec.Code); resp != nil && resp.Value != nil {
		for _, h := range contractHeaders {
			if rec.Header().Get(h) != "" && resp.Value.Headers[h] == nil {
				sc.violation("%s: response header %s is not declared", what, h)
			}
		}
	}
}

// declaresMediaType reports whether op's request body declares the media
// type of the Content-Type ct (a PATCH's merge patch and JSON Patch).
func declaresMediaType(op *openapi3.Operation, ct string) bool {
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && op.RequestBody != nil && op.RequestBody.Value != nil && op.RequestBody.Value.Content[mt] != nil
}

func truncate(b []byte) string {
	if len(b) > 300 {
		return string(b[:300]) + "…"
	}
	return string(b)
}

// TestOpenAPIServedDocumentIsValid: /openapi.json is a valid OpenAPI 3.1
// document that describes every engine route of the demo with its replay
// window, idempotency and conditional headers and problem codes.
func TestOpenAPIServedDocumentIsValid(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite:"+t.TempDir()+"/openapi.db")
	doc := loadServedSpec(t, e.app.Handler())
	want := map[string][]string{
		"PUT /v1/orders/{id}":         {"If-Match", "If-None-Match"},
		"PATCH /v1/orders/{id}":       {"If-Match", "If-None-Match"},
		"GET /v1/orders/{id}":         {"If-None-Match"},
		"HEAD /v1/orders/{id}":        {"If-None-Match"},
		"DELETE /v1/orders/{id}":      {"If-Match"},
		"GET /v1/orders":              nil,
		"HEAD /v1/orders":             nil,
		"GET /v1/ledger":              nil,
		"POST /v1/orders":             {"Idempotency-Key", "X-Idempotency-Key"},
		"POST /v1/orders/{id}/submit": nil,
		"POST /v1/transfers":          {"Idempotency-Key", "X-Idempotency-Key"},
		"GET /v1/accounts/{name}":     nil,
		"POST /v1/payments":           {"Idempotency-Key", "X-Idempotency-Key"},
		"GET /v1/payments/{id}":       nil,
		"GET /v1/sandbox/charges":     nil,
	}
	got := map[string]*openapi3.Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			got[method+" "+path] = op
		}
	}
	for route, headers := range want {
		op := got[route]
		if op == nil {
			t.Fatalf("%s is not described; described: %v", route, slices.Sorted(mapKeys(got)))
		}
		for _, h := range headers {
			if op.Parameters.GetByInAndName(openapi3.ParameterInHeader, h) == nil {
				t.Fatalf("%s: header %s is not declared", route, h)
			}
		}
	}
	if len(got) != len(want) {
		t.Fatalf("described %v, want exactly %d routes", slices.Sorted(mapKeys(got)), len(want))
	}
	put := got["PUT /v1/orders/{id}"]
	if put.Extensions["x-retrysafe-replay-window-seconds"] == nil || !strings.Contains(put.Description, "Replay window: 24h0m0s") {
		t.Fatalf("PUT /v1/orders/{id}: no replay window: %q %v", put.Description, put.Extensions)
	}
	body := put.RequestBody.Value.Content.Get("application/json").Schema.Value
	if !slices.Contains(body.Required, "customer") || body.Properties["currency"].Value.Pattern != "^[A-Za-z]{3}$" ||
		*body.Properties["items"].Value.MaxItems != 100 || body.AdditionalProperties.Has == nil || *body.AdditionalProperties.Has {
		t.Fatalf("the order command's schema does not carry its validate tags: %+v", body)
	}
	created := put.Responses.Status(http.StatusCreated).Value
	for _, h := range []string{"Location", "ETag", "Idempotent-Replayed"} {
		if created.Headers[h] == nil {
			t.Fatalf("PUT 201 does not declare %s", h)
		}
	}
	conflict := got["POST /v1/payments"].Responses.Status(http.StatusConflict).Value
	codes := conflict.Content.Get("application/problem+json").Schema.Value.AllOf[1].Value.Properties["code"].Value.Enum
	if !slices.Contains(codes, any("request_in_progress")) || !slices.Contains(codes, any("outcome_pending")) || conflict.Headers["Retry-After"] == nil {
		t.Fatalf("POST /v1/payments 409: codes %v, headers %v", codes, conflict.Headers)
	}
	if got["POST /v1/payments"].Responses.Status(http.StatusPaymentRequired) == nil {
		t.Fatal("POST /v1/payments does not declare 402 card_declined")
	}
	if rejected := got["PUT /v1/orders/{id}"].Responses.Status(http.StatusUnprocessableEntity); rejected != nil {
		t.Fatal("PUT of a create-or-replace resource declares 422, which it never answers")
	}
}

func mapKeys[K comparable, V any](m map[K]V) func(func(K) bool) {
	return func(yield func(K) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestOpenAPICheckerCatchesUndeclared: the checker that every test's
// server runs flags an undeclared field, status or header.
func TestOpenAPICheckerCatchesUndeclared(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite:"+t.TempDir()+"/checker.db")
	router, err := legacy.NewRouter(loadServedSpec(t, e.app.Handler()))
	if err != nil {
		t.Fatalf("router: %v", err)
	}
	const order = `{"id":"0190a3c2-0000-7000-8000-000000000001","status":"draft","customer":"c","currency":"EUR",` +
		`"items":[{"sku":"s","quantity":1,"unit_price":"1.00"}],"total":"1.00","version":1,` +
		`"created_at":"2026-01-01T00:00:00Z","updated_at":"2026-01-01T00:00:00Z"}`
	cases := []struct {
		name    string
		status  int
		header  string
		body    string
		flagged bool
	}{
		{"declared", http.StatusOK, "ETag", order, false},
		{"undeclared field", http.StatusOK, "ETag", strings.Replace(order, `"total"`, `"secret":"x","total"`, 1), true},
		{"undeclared status", http.StatusTeapot, "", `{}`, true},
		{"undeclared header", http.StatusOK, "Idempotent-Replayed", order, true},
	}
	for _, tc := range cases {
		sc := &specChecker{t: t, router: router}
		rec := httptest.NewRecorder()
		rec.Header().Set("Content-Type", "application/json")
		if tc.header != "" {
			rec.Header().Set(tc.header, `"1-abc"`)
		}
		rec.WriteHeader(tc.status)
		_, _ = rec.WriteString(tc.body)
		req := httptest.NewRequest(http.MethodGet, "/v1/orders/0190a3c2-0000-7000-8000-000000000001", nil)
		req.Header.Set("Authorization", "Bearer "+tokenAcme)
		sc.check(req, nil, rec)
		if got := len(sc.violations) > 0; got != tc.flagged {
			t.Fatalf("%s: flagged %t (%v), want %t", tc.name, got, sc.violations, tc.flagged)
		}
	}
}

// TestOpenAPI30DocumentDescribesTheSameAPI: /openapi-3.0.json is a valid
// OpenAPI 3.0 document (kin-openapi loads it as 3.0) with the operations,
// parameters, answers and answer headers of /openapi.json; only the
// spelling of schemas differs (nullable instead of type lists).
func TestOpenAPI30DocumentDescribesTheSameAPI(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite:"+t.TempDir()+"/openapi.db")
	doc31 := loadServedSpec(t, e.app.Handler())
	res := e.do(http.MethodGet, "/openapi-3.0.json", "", nil)
	wantStatus(t, res, http.StatusOK)
	doc30, err := openapi3.NewLoader().LoadFromData(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	if err := doc30.Validate(t.Context()); err != nil || doc30.OpenAPI != "3.0.3" {
		t.Fatalf("/openapi-3.0.json is OpenAPI %q: %v", doc30.OpenAPI, err)
	}
	if bytes.Contains(res.Body, []byte(`"type":[`)) {
		t.Fatal("/openapi-3.0.json has a type list, which OpenAPI 3.0 does not")
	}
	describe := func(doc *openapi3.T) []string {
		var lines []string
		for path, item := range doc.Paths.Map() {
			for method, op := range item.Operations() {
				for _, p := range op.Parameters {
					lines = append(lines, fmt.Sprintf("%s %s %s: parameter %s %s", method, path, op.OperationID, p.Value.In, p.Value.Name))
				}
				for status, resp := range op.Responses.Map() {
					for name := range resp.Value.Headers {
						lines = append(lines, fmt.Sprintf("%s %s %s: %s header %s", method, path, op.OperationID, status, name))
					}
					for mediaType := range resp.Value.Content {
						lines = append(lines, fmt.Sprintf("%s %s %s: %s %s", method, path, op.OperationID, status, mediaType))
					}
				}
			}
		}
		slices.Sort(lines)
		return lines
	}
	if got, want := describe(doc30), describe(doc31); !slices.Equal(got, want) || len(want) < 100 {
		t.Fatalf("3.0 describes\n%s\n3.1 describes\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
