package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/client"
)

// fault is what the fake API does to one request.
type fault int

const (
	ok              fault = iota // commit (or replay) and answer
	dropAfterCommit              // commit, then cut the connection without answering
	unavailable                  // 503 unavailable before committing
	inProgress                   // 409 request_in_progress, Retry-After: 1
	pendingAfter                 // commit, then answer 409 outcome_pending
	hangAfterCommit              // commit, then hang until the client gives up
)

// stored is the original answer to a key or ID.
type stored struct {
	status int
	body   []byte
	etag   string
}

// fakeAPI is a minimal retrysafe API: PUT /v1/orders/{id} and POST
// /v1/payments, with injectable faults per attempt, counting effects per
// key (or ID).
type fakeAPI struct {
	t     *testing.T
	srv   *httptest.Server
	token string // required bearer token; "" accepts any

	mu       sync.Mutex
	plan     func(key string, n int) fault // n is the 1-based request number for key
	fixed    map[string]fixedAnswer        // path → canned answer, checked first
	requests int
	perKey   map[string]int
	keys     []string // key or ID of every request, in order
	effects  map[string]int
	answers  map[string]stored
	seq      int
	ifNone   []string // If-None-Match of every PUT
}

// fixedAnswer is a canned answer for a path, sent on every request to it.
type fixedAnswer struct {
	status     int
	code       string
	retryAfter string
}

func newFakeAPI(t *testing.T) *fakeAPI {
	t.Helper()
	api := &fakeAPI{
		t:       t,
		plan:    func(string, int) fault { return ok },
		fixed:   map[string]fixedAnswer{},
		perKey:  map[string]int{},
		effects: map[string]int{},
		answers: map[string]stored{},
	}
	api.srv = httptest.NewServer(http.HandlerFunc(api.serve))
	t.Cleanup(api.srv.Close)
	return api
}

func (api *fakeAPI) requireToken(token string) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.token = token
}

func (api *fakeAPI) setPlan(plan func(key string, n int) fault) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.plan = plan
}

// faults returns a plan that applies fs to the first requests of every key
// and answers normally afterwards.
func faults(fs ...fault) func(string, int) fault {
	return func(_ string, n int) fault {
		if n <= len(fs) {
			return fs[n-1]
		}
		return ok
	}
}

func (api *fakeAPI) setFixed(path string, a fixedAnswer) {
	api.mu.Lock()
	defer api.mu.Unlock()
	api.fixed[path] = a
}

func (api *fakeAPI) stats() (requests int, keys []string, effects map[string]int) {
	api.mu.Lock()
	defer api.mu.Unlock()
	eff := make(map[string]int, len(api.effects))
	for k, v := range api.effects {
		eff[k] = v
	}
	return api.requests, append([]string(nil), api.keys...), eff
}

func (api *fakeAPI) answer(key string) stored {
	api.mu.Lock()
	defer api.mu.Unlock()
	return api.answers[key]
}

func writeProblem(w http.ResponseWriter, status int, code, retryAfter string) {
	if retryAfter != "" {
		w.Header().Set("Retry-After", retryAfter)
	}
	w.Header().Set("Content-Type", "application/problem+json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type": "https://retrysafe.dev/problems/" + code, "title": http.StatusText(status),
		"status": status, "detail": "detail of " + code, "code": code,
	})
}

func (api *fakeAPI) serve(w http.ResponseWriter, r *http.Request) {
	// Reading the body lets the server notice a client that hangs up.
	if _, err := io.Copy(io.Discard, r.Body); err != nil {
		return
	}
	var key string
	switch {
	case r.Method == http.MethodPost:
		key = r.Header.Get("Idempotency-Key")
		w.Header().Set("Idempotency-Key", key)
	case r.Method == http.MethodPut && strings.HasPrefix(r.URL.Path, "/v1/orders/"):
		key = strings.TrimPrefix(r.URL.Path, "/v1/orders/")
	default:
		writeProblem(w, http.StatusNotFound, client.CodeNotFound, "")
		return
	}
	api.mu.Lock()
	token := api.token
	api.mu.Unlock()
	if token != "" && r.Header.Get("Authorization") != "Bearer "+token {
		api.mu.Lock()
		api.requests++
		api.keys = append(api.keys, key)
		api.mu.Unlock()
		writeProblem(w, http.StatusUnauthorized, client.CodeUnauthenticated, "")
		return
	}

	api.mu.Lock()
	api.requests++
	api.keys = append(api.keys, key)
	if r.Method == http.MethodPut {
		api.ifNone = append(api.ifNone, r.Header.Get("If-None-Match"))
	}
	if fa, found := api.fixed[r.URL.Path]; found {
		api.mu.Unlock()
		writeProblem(w, fa.status, fa.code, fa.retryAfter)
		return
	}
	api.perKey[key]++
	f := api.plan(key, api.perKey[key])
	switch f {
	case unavailable:
		api.mu.Unlock()
		writeProblem(w, http.StatusServiceUnavailable, client.CodeUnavailable, "")
		return
	case inProgress:
		api.mu.Unlock()
		writeProblem(w, http.StatusConflict, client.CodeRequestInProgress, "1")
		return
	}
	ans, replay := api.answers[key]
	if !replay {
		api.seq++
		api.effects[key]++
		body, err := json.Marshal(map[string]any{"id": fmt.Sprintf("res_%d", api.seq), "key": key})
		if err != nil {
			api.mu.Unlock()
			api.t.Errorf("marshal: %v", err)
			return
		}
		ans = stored{status: http.StatusCreated, body: body, etag: fmt.Sprintf(`"v%d"`, api.seq)}
		api.answers[key] = ans
	}
	api.mu.Unlock()

	switch f {
	case dropAfterCommit:
		conn, _, err := http.NewResponseController(w).Hijack()
		if err != nil {
			api.t.Errorf("hijack: %v", err)
			return
		}
		_ = conn.Close()
		return
	case pendingAfter:
		writeProblem(w, http.StatusConflict, client.CodeOutcomePending, "2")
		return
	case hangAfterCommit:
		select {
		case <-r.Context().Done():
		case <-time.After(10 * time.Second):
			api.t.Errorf("the client did not give up on a hanging request")
		}
		return
	}
	w.Header().Set("Content-Type", "application/json")
	if r.Method == http.MethodPut {
		w.Header().Set("Location", r.URL.Path)
		w.Header().Set("ETag", ans.etag)
	}
	if replay {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(ans.status)
	_, _ = w.Write(ans.body)
}

// fakeClock is an injectable clock whose Sleep records the wait and moves
// time forward instantly.
type fakeClock struct {
	mu     sync.Mutex
	now    time.Time
	sleeps []time.Duration
}

func newFakeClock() *fakeClock {
	return &fakeClock{now: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.sleeps = append(c.sleeps, d)
	c.now = c.now.Add(d)
	return nil
}

func (c *fakeClock) Sleeps() []time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]time.Duration(nil), c.sleeps...)
}

// testEnv is what setup returns.
type testEnv struct {
	api    *fakeAPI
	clock  *fakeClock
	client *client.Client
	cfg    client.Config
}

// setup starts a fake API and a client wired to a fake clock, zero jitter
// (RandFunc returns 0) and a transport without keep-alives, so that each
// attempt is exactly one request on the server. tweak may change the
// Config before the client is built.
func setup(t *testing.T, tweak func(*client.Config)) *testEnv {
	t.Helper()
	api := newFakeAPI(t)
	clock := newFakeClock()
	tr := &http.Transport{DisableKeepAlives: true}
	t.Cleanup(tr.CloseIdleConnections)
	cfg := client.Config{
		HTTPClient: &http.Client{Transport: tr},
		NowFunc:    clock.Now,
		SleepFunc:  clock.Sleep,
		RandFunc:   func() float64 { return 0 },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := client.New(api.srv.URL, &cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return &testEnv{api: api, clock: clock, client: c, cfg: cfg}
}

// asError returns err as a *client.Error or stops the test.
func asError(t *testing.T, err error) *client.Error {
	t.Helper()
	if err == nil {
		t.Fatal("got nil error, want *client.Error")
	}
	e, found := errors.AsType[*client.Error](err)
	if !found {
		t.Fatalf("error %v (%T) is not a *client.Error", err, err)
	}
	return e
}
