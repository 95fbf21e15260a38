package client_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/retrysafe/retrysafe/client"
)

var paymentBody = []byte(`{"amount":4200,"currency":"usd","customer":"cus_8812"}`)

var orderBody = []byte(`{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.00"}]}`)

// assertOneEffect checks that every request used key, that key had exactly
// one effect, and that res carries the original answer.
func assertOneEffect(t *testing.T, env *testEnv, res *client.Result, key string) {
	t.Helper()
	requests, keys, effects := env.api.stats()
	if requests != res.Attempts {
		t.Fatalf("server saw %d requests, client reports %d attempts", requests, res.Attempts)
	}
	for i, k := range keys {
		if k != key {
			t.Fatalf("request %d used key %q, want %q on every attempt", i+1, k, key)
		}
	}
	if effects[key] != 1 || len(effects) != 1 {
		t.Fatalf("effects = %v, want exactly one for %q", effects, key)
	}
	if orig := env.api.answer(key); !bytes.Equal(res.Body, orig.body) || res.Status != orig.status {
		t.Fatalf("got %d %s, want the original %d %s", res.Status, res.Body, orig.status, orig.body)
	}
}

func TestPostRetriesWithSameKeyUntilOneEffect(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		faults       []fault
		wantReplayed bool
	}{
		{"no fault", nil, false},
		{"response lost after commit", []fault{dropAfterCommit}, true},
		{"503 then lost after commit", []fault{unavailable, dropAfterCommit}, true},
		{"in progress then 503", []fault{inProgress, unavailable}, false},
		{"outcome pending after commit", []fault{pendingAfter}, true},
		{"lost twice", []fault{dropAfterCommit, dropAfterCommit, inProgress}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := setup(t, nil)
			env.api.setPlan(faults(tt.faults...))

			res, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
			if err != nil {
				t.Fatalf("Post: %v", err)
			}
			if res.Attempts != len(tt.faults)+1 {
				t.Fatalf("Attempts = %d, want %d", res.Attempts, len(tt.faults)+1)
			}
			if res.Replayed != tt.wantReplayed {
				t.Fatalf("Replayed = %t, want %t", res.Replayed, tt.wantReplayed)
			}
			if err := client.ValidateKey(res.Key); err != nil {
				t.Fatalf("generated key %q: %v", res.Key, err)
			}
			if got := res.Header.Get("Idempotency-Key"); got != res.Key {
				t.Fatalf("echoed key %q, want %q", got, res.Key)
			}
			assertOneEffect(t, env, res, res.Key)
		})
	}
}

func TestPostUsesCallerKey(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	env.api.setPlan(faults(dropAfterCommit))

	res, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Key: "order-1042:charge", Body: paymentBody})
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	if res.Key != "order-1042:charge" || !res.Replayed {
		t.Fatalf("Key = %q, Replayed = %t; want the caller's key, replayed", res.Key, res.Replayed)
	}
	assertOneEffect(t, env, res, "order-1042:charge")
}

func TestPostRejectsInvalidKeyWithoutSending(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	for _, key := range []string{"has space", strings.Repeat("k", 256), "ünïcode", `"quoted"`} {
		_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Key: key, Body: paymentBody})
		if !errors.Is(err, client.ErrInvalidKey) {
			t.Fatalf("key %q: err = %v, want ErrInvalidKey", key, err)
		}
	}
	if requests, _, _ := env.api.stats(); requests != 0 {
		t.Fatalf("server saw %d requests, want 0", requests)
	}
}

func TestCreateRetriesWithSameID(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		faults       []fault
		wantReplayed bool
	}{
		{"no fault", nil, false},
		{"response lost after commit", []fault{dropAfterCommit}, true},
		{"503 then in progress then lost", []fault{unavailable, inProgress, dropAfterCommit}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := setup(t, nil)
			env.api.setPlan(faults(tt.faults...))

			res, err := env.client.Create(t.Context(), client.CreateRequest{Collection: "/v1/orders", Body: orderBody})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			if res.ID.Version() != 7 {
				t.Fatalf("generated ID %s is version %d, want the default 7", res.ID, res.ID.Version())
			}
			if res.Replayed != tt.wantReplayed || res.Status != http.StatusCreated {
				t.Fatalf("Status = %d, Replayed = %t; want 201, %t", res.Status, res.Replayed, tt.wantReplayed)
			}
			if want := "/v1/orders/" + res.ID.String(); res.Location != want || res.ETag == "" {
				t.Fatalf("Location = %q, ETag = %q; want %q and an ETag", res.Location, res.ETag, want)
			}
			assertOneEffect(t, env, res, res.ID.String())
			env.api.mu.Lock()
			defer env.api.mu.Unlock()
			for i, v := range env.api.ifNone {
				if v != "*" {
					t.Fatalf("PUT %d sent If-None-Match %q, want *", i+1, v)
				}
			}
		})
	}
}

func TestCreateUsesCallerIDAndUUIDv4(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *client.Config) { c.UUIDVersion = 4 })
	env.api.setPlan(faults(dropAfterCommit))

	id := uuid.MustParse("0195a4b2-7c1e-7d3a-9f00-000000000001")
	res, err := env.client.Create(t.Context(), client.CreateRequest{Collection: "/v1/orders", ID: id, Body: orderBody})
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if res.ID != id || !res.Replayed {
		t.Fatalf("ID = %s, Replayed = %t; want %s, true", res.ID, res.Replayed, id)
	}
	assertOneEffect(t, env, res, id.String())

	generated, err := env.client.NewID()
	if err != nil || generated.Version() != 4 {
		t.Fatalf("NewID() = %s, %v; want a version 4 UUID", generated, err)
	}
}

func TestAttemptTimeoutIsRetried(t *testing.T) {
	t.Parallel()
	// The first attempt hangs until its timeout; later attempts are not
	// bound by it (the transport sends them without the attempt's
	// deadline), so a slow machine cannot time the replay out as well.
	env := setup(t, func(c *client.Config) {
		c.AttemptTimeout = 100 * time.Millisecond
		c.HTTPClient = &http.Client{Transport: &deadlineOnFirstAttempt{next: c.HTTPClient.Transport}}
	})
	env.api.setPlan(faults(hangAfterCommit))

	res, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	if !res.Replayed || res.Attempts != 2 {
		t.Fatalf("Replayed = %t, Attempts = %d; want a replay on attempt 2", res.Replayed, res.Attempts)
	}
	assertOneEffect(t, env, res, res.Key)
}

// deadlineOnFirstAttempt sends the first request as it is and every later
// one without its context's deadline or cancellation (its values, such as
// the client's trace, are kept).
type deadlineOnFirstAttempt struct {
	next http.RoundTripper
	sent atomic.Int32
}

func (d *deadlineOnFirstAttempt) RoundTrip(r *http.Request) (*http.Response, error) {
	if d.sent.Add(1) == 1 {
		return d.next.RoundTrip(r)
	}
	return d.next.RoundTrip(r.WithContext(context.WithoutCancel(r.Context())))
}

func TestConcurrentOperationsHaveOneEffectEach(t *testing.T) {
	t.Parallel()
	// The fake clock is shared, so every operation's waits age the others:
	// lift the elapsed-time cap out of the way.
	env := setup(t, func(c *client.Config) { c.MaxElapsed = time.Hour })
	env.api.setPlan(func(key string, n int) fault {
		// Each key gets its own deterministic mix of faults.
		plan := []fault{dropAfterCommit, unavailable, inProgress, pendingAfter}
		if n > 2 {
			return ok
		}
		return plan[(len(key)+int(key[len(key)-1])+n)%len(plan)]
	})

	const ops = 32
	results := make([]*client.Result, ops)
	var wg sync.WaitGroup
	for i := range ops {
		wg.Go(func() {
			var err error
			results[i], err = env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
			if err != nil {
				t.Errorf("op %d: %v", i, err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	_, _, effects := env.api.stats()
	if len(effects) != ops {
		t.Fatalf("%d keys had effects, want %d", len(effects), ops)
	}
	for _, res := range results {
		if effects[res.Key] != 1 {
			t.Fatalf("key %s had %d effects, want 1", res.Key, effects[res.Key])
		}
		if orig := env.api.answer(res.Key); !bytes.Equal(res.Body, orig.body) {
			t.Fatalf("key %s: got %s, want the original %s", res.Key, res.Body, orig.body)
		}
	}
}

// TestPropertyOneEffectPerOperation drives random fault sequences: whatever
// happens, a key never has more than one effect, a success carries the
// original answer, and an error whose outcome is known had no effect.
func TestPropertyOneEffectPerOperation(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *client.Config) { c.MaxAttempts = 4 })
	var calls atomic.Int64
	rapid.Check(t, func(rt *rapid.T) {
		plan := rapid.SliceOfN(rapid.SampledFrom([]fault{ok, dropAfterCommit, unavailable, inProgress, pendingAfter}), 0, 6).Draw(rt, "faults")
		key := fmt.Sprintf("prop-%d", calls.Add(1))
		env.api.setPlan(func(k string, n int) fault {
			if k == key && n <= len(plan) {
				return plan[n-1]
			}
			return ok
		})
		res, err := env.client.Post(context.Background(), client.PostRequest{Path: "/v1/payments", Key: key, Body: paymentBody})
		_, _, effects := env.api.stats()
		if effects[key] > 1 {
			rt.Fatalf("key %s had %d effects", key, effects[key])
		}
		if err != nil {
			e, found := errors.AsType[*client.Error](err)
			if !found || !errors.Is(err, client.ErrRetriesExhausted) || e.Attempts != 4 {
				rt.Fatalf("err = %v, want ErrRetriesExhausted after 4 attempts", err)
			}
			if e.OutcomeKnown {
				rt.Fatalf("outcome reported known after %v", plan)
			}
			return
		}
		if effects[key] != 1 || !bytes.Equal(res.Body, env.api.answer(key).body) {
			rt.Fatalf("success with %d effects, body %s", effects[key], res.Body)
		}
	})
}

func TestUnauthorizedRefreshesThenRetriesWithSameKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		refreshed    string // token returned by RefreshTokenFunc; "" for no hook
		wantRequests int
		wantRefresh  int64
		wantErr      bool
	}{
		{"refresh fixes it", "good", 2, 1, false},
		{"permanently bad token", "still-bad", 2, 1, true},
		{"no hook", "", 1, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var refreshes atomic.Int64
			env := setup(t, func(c *client.Config) {
				c.Token = "expired"
				if tt.refreshed != "" {
					c.RefreshTokenFunc = func(context.Context) (string, error) {
						refreshes.Add(1)
						return tt.refreshed, nil
					}
				}
			})
			env.api.requireToken("good")

			res, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Key: "k-401", Body: paymentBody})
			requests, keys, effects := env.api.stats()
			if requests != tt.wantRequests || refreshes.Load() != tt.wantRefresh {
				t.Fatalf("requests = %d, refreshes = %d; want %d, %d", requests, refreshes.Load(), tt.wantRequests, tt.wantRefresh)
			}
			for _, k := range keys {
				if k != "k-401" {
					t.Fatalf("a retry used key %q", k)
				}
			}
			if !tt.wantErr {
				if err != nil {
					t.Fatalf("Post: %v", err)
				}
				assertOneEffect(t, env, res, "k-401")
				return
			}
			e := asError(t, err)
			if e.Status != http.StatusUnauthorized || e.Code != client.CodeUnauthenticated || !e.OutcomeKnown || len(effects) != 0 {
				t.Fatalf("err = %v, effects = %v; want a known 401 with no effect", err, effects)
			}
		})
	}
}

func TestRefreshErrorIsReturned(t *testing.T) {
	t.Parallel()
	boom := errors.New("identity provider down")
	env := setup(t, func(c *client.Config) {
		c.Token = "expired"
		c.RefreshTokenFunc = func(context.Context) (string, error) { return "", boom }
	})
	env.api.requireToken("good")

	_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap the hook's error", err)
	}
	if requests, _, _ := env.api.stats(); requests != 1 {
		t.Fatalf("requests = %d, want 1", requests)
	}
}

func TestDefinitiveAnswersAreNotRetried(t *testing.T) {
	t.Parallel()
	// Known final codes are not retried even with a stray Retry-After; a
	// service's own codes are final when, as the server does, they come
	// without one.
	tests := []struct {
		status     int
		code       string
		retryAfter string
	}{
		{http.StatusBadRequest, client.CodeValidationFailed, "1"},
		{http.StatusBadRequest, client.CodeMalformedJSON, "1"},
		{http.StatusPaymentRequired, "card_declined", "1"},
		{http.StatusNotFound, client.CodeNotFound, "1"},
		{http.StatusConflict, client.CodeResourceLocked, "1"},
		{http.StatusConflict, "currency_mismatch", ""},
		{http.StatusGone, client.CodeResourceDeleted, "1"},
		{http.StatusPreconditionFailed, client.CodePreconditionFailed, "1"},
		{http.StatusRequestEntityTooLarge, client.CodePayloadTooLarge, "1"},
		{http.StatusUnsupportedMediaType, client.CodeUnsupportedMediaType, "1"},
		{http.StatusUnprocessableEntity, client.CodeIdempotencyKeyReuse, "1"},
	}
	for _, tt := range tests {
		for _, method := range []string{http.MethodPost, http.MethodPut} {
			t.Run(fmt.Sprintf("%s %d %s", method, tt.status, tt.code), func(t *testing.T) {
				t.Parallel()
				env := setup(t, nil)
				var err error
				if method == http.MethodPost {
					env.api.setFixed("/v1/payments", fixedAnswer{status: tt.status, code: tt.code, retryAfter: tt.retryAfter})
					_, err = env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
				} else {
					id := uuid.New()
					env.api.setFixed("/v1/orders/"+id.String(), fixedAnswer{status: tt.status, code: tt.code, retryAfter: tt.retryAfter})
					_, err = env.client.Create(t.Context(), client.CreateRequest{Collection: "/v1/orders", ID: id, Body: orderBody})
				}
				e := asError(t, err)
				if requests, _, _ := env.api.stats(); requests != 1 {
					t.Fatalf("server saw %d requests, want exactly 1", requests)
				}
				if e.Status != tt.status || e.Code != tt.code || e.Detail() != "detail of "+tt.code {
					t.Fatalf("Error = %+v, want status %d code %s with its detail", e, tt.status, tt.code)
				}
				if !e.OutcomeKnown || e.Attempts != 1 || errors.Is(err, client.ErrRetriesExhausted) {
					t.Fatalf("OutcomeKnown = %t, Attempts = %d, err = %v; want a known outcome after 1 attempt", e.OutcomeKnown, e.Attempts, err)
				}
				if s := env.clock.Sleeps(); len(s) != 0 {
					t.Fatalf("slept %v, want no sleep", s)
				}
			})
		}
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	t.Parallel()
	clockNow := newFakeClock().Now() // every fake clock starts at the same instant
	tests := []struct {
		name       string
		retryAfter string
		want       time.Duration
	}{
		{"delta seconds", "7", 7 * time.Second},
		{"HTTP-date", clockNow.Add(9 * time.Second).Format(http.TimeFormat), 9 * time.Second},
		{"HTTP-date in the past", clockNow.Add(-time.Hour).Format(http.TimeFormat), 0},
		{"zero", "0", 0},
		{"garbage falls back to backoff", "soon", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			env := setup(t, func(c *client.Config) { c.MaxAttempts = 2 })
			env.api.setFixed("/v1/payments", fixedAnswer{status: http.StatusServiceUnavailable, code: client.CodeUnavailable, retryAfter: tt.retryAfter})

			_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
			if !errors.Is(err, client.ErrRetriesExhausted) {
				t.Fatalf("err = %v, want ErrRetriesExhausted", err)
			}
			if got := env.clock.Sleeps(); len(got) != 1 || got[0] != tt.want {
				t.Fatalf("sleeps = %v, want [%v]", got, tt.want)
			}
		})
	}
}

func TestRetryAfterLongerThanBackoffCap(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *client.Config) {
		c.MaxDelay = time.Second
		c.RandFunc = func() float64 { return 0.999 }
	})
	env.api.setPlan(faults(inProgress, unavailable, unavailable))

	res, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	assertOneEffect(t, env, res, res.Key)
	got := env.clock.Sleeps()
	// 409 request_in_progress carries Retry-After: 1 (over the 0.1 s
	// ceiling); the 503s have none, so jitter stays under 0.2 s and 0.4 s.
	if len(got) != 3 || got[0] != time.Second || got[1] > 200*time.Millisecond || got[2] > 400*time.Millisecond || got[2] < 390*time.Millisecond {
		t.Fatalf("sleeps = %v, want [1s, ≤200ms, ~400ms]", got)
	}
}

func TestAttemptCap(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status       int
		code         string
		retryAfter   string
		outcomeKnown bool
	}{
		{http.StatusServiceUnavailable, client.CodeUnavailable, "", false},
		{http.StatusConflict, client.CodeOutcomePending, "", false},
		{http.StatusTooManyRequests, "", "", true},
		// A service's own code: retryable because it carries Retry-After.
		{http.StatusConflict, "ledger_busy", "1", false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, tt.code), func(t *testing.T) {
			t.Parallel()
			env := setup(t, func(c *client.Config) { c.MaxAttempts = 3 })
			env.api.setFixed("/v1/payments", fixedAnswer{status: tt.status, code: tt.code, retryAfter: tt.retryAfter})

			_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
			e := asError(t, err)
			if !errors.Is(err, client.ErrRetriesExhausted) || e.Attempts != 3 || e.Status != tt.status || e.Code != tt.code {
				t.Fatalf("err = %v, want ErrRetriesExhausted after 3 attempts with the last status", err)
			}
			if e.OutcomeKnown != tt.outcomeKnown {
				t.Fatalf("OutcomeKnown = %t, want %t", e.OutcomeKnown, tt.outcomeKnown)
			}
			if requests, _, _ := env.api.stats(); requests != 3 {
				t.Fatalf("server saw %d requests, want 3", requests)
			}
			if s := env.clock.Sleeps(); len(s) != 2 {
				t.Fatalf("slept %v, want 2 waits", s)
			}
		})
	}
}

func TestAttemptCapAfterLostResponse(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *client.Config) { c.MaxAttempts = 1 })
	env.api.setPlan(faults(dropAfterCommit))

	_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
	e := asError(t, err)
	if !errors.Is(err, client.ErrRetriesExhausted) || e.OutcomeKnown || e.Status != 0 || e.Key == "" {
		t.Fatalf("err = %+v, want an unknown outcome with no status and the key", e)
	}
}

func TestElapsedTimeCap(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *client.Config) {
		c.MaxAttempts = 100
		c.MaxElapsed = 10 * time.Second
	})
	env.api.setFixed("/v1/payments", fixedAnswer{status: http.StatusServiceUnavailable, code: client.CodeUnavailable, retryAfter: "3"})

	_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
	e := asError(t, err)
	// Attempts at 0 s, 3 s, 6 s and 9 s; the next would start at 12 s.
	if !errors.Is(err, client.ErrRetriesExhausted) || e.Attempts != 4 || e.OutcomeKnown {
		t.Fatalf("err = %v, want ErrRetriesExhausted after 4 attempts, outcome unknown", err)
	}
	got := env.clock.Sleeps()
	if len(got) != 3 {
		t.Fatalf("sleeps = %v, want three 3 s waits", got)
	}
	var total time.Duration
	for _, d := range got {
		total += d
	}
	if total > 10*time.Second {
		t.Fatalf("slept %v in total, over MaxElapsed", total)
	}
}

func TestContextCancellation(t *testing.T) {
	t.Parallel()

	t.Run("cancelled during the wait", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		var sleeps atomic.Int64
		env := setup(t, func(c *client.Config) {
			c.SleepFunc = func(ctx context.Context, d time.Duration) error {
				sleeps.Add(1)
				cancel()
				<-ctx.Done()
				return ctx.Err()
			}
		})
		env.api.setFixed("/v1/payments", fixedAnswer{status: http.StatusServiceUnavailable, code: client.CodeUnavailable})

		_, err := env.client.Post(ctx, client.PostRequest{Path: "/v1/payments", Body: paymentBody})
		e := asError(t, err)
		if !errors.Is(err, context.Canceled) || e.Attempts != 1 || e.OutcomeKnown || sleeps.Load() != 1 {
			t.Fatalf("err = %v, sleeps = %d; want context.Canceled after 1 attempt and 1 wait, outcome unknown", err, sleeps.Load())
		}
	})

	t.Run("no wait past the deadline", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		defer cancel()
		env := setup(t, func(c *client.Config) { c.MaxElapsed = 2 * time.Hour })
		env.api.setFixed("/v1/payments", fixedAnswer{status: http.StatusServiceUnavailable, code: client.CodeUnavailable, retryAfter: "3600"})

		_, err := env.client.Post(ctx, client.PostRequest{Path: "/v1/payments", Body: paymentBody})
		e := asError(t, err)
		if !errors.Is(err, context.DeadlineExceeded) || e.Attempts != 1 {
			t.Fatalf("err = %v, want context.DeadlineExceeded after 1 attempt", err)
		}
		if s := env.clock.Sleeps(); len(s) != 0 {
			t.Fatalf("slept %v past the context deadline", s)
		}
	})

	t.Run("already cancelled", func(t *testing.T) {
		t.Parallel()
		env := setup(t, nil)
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := env.client.Post(ctx, client.PostRequest{Path: "/v1/payments", Body: paymentBody})
		e := asError(t, err)
		if !errors.Is(err, context.Canceled) || e.Attempts != 0 || !e.OutcomeKnown {
			t.Fatalf("err = %v, want context.Canceled before any attempt, outcome known", err)
		}
		if requests, _, _ := env.api.stats(); requests != 0 {
			t.Fatalf("server saw %d requests, want 0", requests)
		}
	})

	t.Run("cancelled during an attempt", func(t *testing.T) {
		t.Parallel()
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		env := setup(t, nil)
		env.api.setPlan(func(string, int) fault { cancel(); return hangAfterCommit })
		_, err := env.client.Post(ctx, client.PostRequest{Path: "/v1/payments", Body: paymentBody})
		e := asError(t, err)
		if !errors.Is(err, context.Canceled) || e.Attempts != 1 || e.OutcomeKnown {
			t.Fatalf("err = %v, want context.Canceled after 1 attempt, outcome unknown", err)
		}
	})
}

func TestDefaultSleepRespectsContext(t *testing.T) {
	t.Parallel()
	// The default SleepFunc must return as soon as ctx is done, well before
	// the backoff delay would end.
	env := setup(t, func(c *client.Config) {
		c.SleepFunc = nil
		c.BaseDelay = time.Hour
		c.RandFunc = func() float64 { return 0.5 }
		c.MaxElapsed = 3 * time.Hour
	})
	env.api.setFixed("/v1/payments", fixedAnswer{status: http.StatusServiceUnavailable, code: client.CodeUnavailable})
	ctx, cancel := context.WithCancel(t.Context())
	time.AfterFunc(20*time.Millisecond, cancel)

	start := time.Now()
	_, err := env.client.Post(ctx, client.PostRequest{Path: "/v1/payments", Body: paymentBody})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Fatalf("returned after %v, want promptly after cancellation", elapsed)
	}
}

func TestBodyIsResentUnchanged(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var bodies [][]byte
	env := setup(t, func(c *client.Config) {
		c.HTTPClient = &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
			var buf bytes.Buffer
			if _, err := buf.ReadFrom(r.Body); err != nil {
				return nil, err
			}
			mu.Lock()
			bodies = append(bodies, buf.Bytes())
			n := len(bodies)
			mu.Unlock()
			if n < 3 {
				return nil, errors.New("connection reset by peer")
			}
			r.Body = http.NoBody
			return &http.Response{StatusCode: http.StatusCreated, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
		})}
	})
	if _, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody}); err != nil {
		t.Fatalf("Post: %v", err)
	}
	if len(bodies) != 3 {
		t.Fatalf("%d attempts, want 3", len(bodies))
	}
	for i, b := range bodies {
		if !bytes.Equal(b, paymentBody) {
			t.Fatalf("attempt %d sent %q, want %q", i+1, b, paymentBody)
		}
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestResponseTooLarge(t *testing.T) {
	t.Parallel()
	env := setup(t, func(c *client.Config) { c.MaxResponseBytes = 8 })
	_, err := env.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: paymentBody})
	e := asError(t, err)
	if !errors.Is(err, client.ErrResponseTooLarge) || e.Status != http.StatusCreated || !e.OutcomeKnown || e.Attempts != 1 {
		t.Fatalf("err = %v, want ErrResponseTooLarge on a 201 after 1 attempt", err)
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		base string
		cfg  client.Config
	}{
		{"relative base URL", "/v1", client.Config{}},
		{"non-http base URL", "ftp://example.com", client.Config{}},
		{"negative MaxAttempts", "http://x", client.Config{MaxAttempts: -1}},
		{"negative MaxElapsed", "http://x", client.Config{MaxElapsed: -time.Second}},
		{"negative AttemptTimeout", "http://x", client.Config{AttemptTimeout: -time.Second}},
		{"negative BaseDelay", "http://x", client.Config{BaseDelay: -time.Second}},
		{"MaxDelay below BaseDelay", "http://x", client.Config{BaseDelay: time.Second, MaxDelay: time.Millisecond}},
		{"UUID version 5", "http://x", client.Config{UUIDVersion: 5}},
		{"negative MaxResponseBytes", "http://x", client.Config{MaxResponseBytes: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := client.New(tt.base, &tt.cfg); !errors.Is(err, client.ErrInvalidConfig) {
				t.Fatalf("New: err = %v, want ErrInvalidConfig", err)
			}
		})
	}
	if _, err := client.New("http://x", nil); err != nil {
		t.Fatalf("New with nil Config: %v", err)
	}
	if _, err := client.New("http://x", &client.Config{BaseDelay: time.Minute}); err != nil {
		t.Fatalf("New with a long BaseDelay and default MaxDelay: %v", err)
	}
}

func TestInvalidRequests(t *testing.T) {
	t.Parallel()
	env := setup(t, nil)
	if _, err := env.client.Create(t.Context(), client.CreateRequest{Body: orderBody}); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("Create without Collection: err = %v, want ErrInvalidRequest", err)
	}
	if _, err := env.client.Post(t.Context(), client.PostRequest{Body: paymentBody}); !errors.Is(err, client.ErrInvalidRequest) {
		t.Fatalf("Post without Path: err = %v, want ErrInvalidRequest", err)
	}
}
