package retrysafetest

// The kit's proof that it can fail: each defect below is planted in the
// service of kit_test.go (a middleware in front of its handler), the kit
// runs inside a fake testing.TB, and the check that guards against the
// defect must report a failure with the reason.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

// fakeTB records what a check reports instead of failing the test that
// runs it. What it does not record (TempDir, Name, Setenv…) is the real
// test's.
type fakeTB struct {
	testing.TB
	ctx    context.Context
	cancel context.CancelFunc

	mu       sync.Mutex
	failed   bool
	skipped  bool
	logs     []string
	cleanups []func()
}

func (f *fakeTB) Helper()                      {}
func (f *fakeTB) Context() context.Context     { return f.ctx }
func (f *fakeTB) Log(args ...any)              { f.logf("%s", fmt.Sprintln(args...)) }
func (f *fakeTB) Logf(format string, a ...any) { f.logf(format, a...) }
func (f *fakeTB) Error(args ...any)            { f.Log(args...); f.Fail() }
func (f *fakeTB) Errorf(format string, a ...any) {
	f.logf(format, a...)
	f.Fail()
}
func (f *fakeTB) Fatal(args ...any)              { f.Log(args...); f.FailNow() }
func (f *fakeTB) Fatalf(format string, a ...any) { f.logf(format, a...); f.FailNow() }
func (f *fakeTB) FailNow()                       { f.Fail(); runtime.Goexit() }
func (f *fakeTB) Skip(args ...any)               { f.Log(args...); f.SkipNow() }
func (f *fakeTB) Skipf(format string, a ...any)  { f.logf(format, a...); f.SkipNow() }
func (f *fakeTB) Cleanup(fn func())              { f.mu.Lock(); f.cleanups = append(f.cleanups, fn); f.mu.Unlock() }

func (f *fakeTB) logf(format string, a ...any) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.logs = append(f.logs, fmt.Sprintf(format, a...))
}

func (f *fakeTB) Fail() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failed = true
}

func (f *fakeTB) Failed() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.failed
}

func (f *fakeTB) SkipNow() {
	f.mu.Lock()
	f.skipped = true
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fakeTB) Skipped() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.skipped
}

// verdict is what one check reported.
type verdict struct {
	failed, skipped bool
	log             string
}

// runFake runs the kit's checks named in only (all when only is empty)
// each inside a fakeTB, as Run runs them in subtests, and returns what
// each reported.
func runFake(t *testing.T, cfg Config, only ...string) map[string]verdict {
	t.Helper()
	verdicts := map[string]verdict{}
	run(t, cfg, func(name string, check func(testing.TB)) {
		if len(only) > 0 && !strings.Contains(" "+strings.Join(only, " ")+" ", " "+name+" ") {
			return
		}
		ctx, cancel := context.WithCancel(t.Context())
		f := &fakeTB{TB: t, ctx: ctx, cancel: cancel}
		done := make(chan struct{})
		go func() {
			defer close(done)
			defer func() {
				cancel()
				for i := len(f.cleanups) - 1; i >= 0; i-- {
					f.cleanups[i]()
				}
			}()
			check(f)
		}()
		<-done
		verdicts[name] = verdict{failed: f.Failed(), skipped: f.Skipped(), log: strings.Join(f.logs, "\n")}
	})
	return verdicts
}

// operationOf names the write a request makes: its key, or its method
// and path.
func operationOf(r *http.Request) string {
	if key := r.Header.Get(wire.HeaderIdempotencyKey); key != "" {
		return key
	}
	return r.Method + " " + r.URL.Path
}

// elsewhere is r, a write, made a new one: another key, or another ID.
func elsewhere(r *http.Request, body []byte) *http.Request {
	r2 := r.Clone(r.Context())
	if key := r.Header.Get(wire.HeaderIdempotencyKey); key != "" {
		r2.Header.Set(wire.HeaderIdempotencyKey, key+"-again")
	} else {
		r2.URL.Path = r.URL.Path[:strings.LastIndex(r.URL.Path, "/")+1] + uuid.NewString()
	}
	r2.Body = io.NopCloser(bytes.NewReader(body))
	return r2
}

// planted middlewares of the service: each plants one defect.
type planted func(next http.Handler) http.Handler

// writesTwiceOnRetry executes a retry as a new write as well (another
// key or ID), then answers it with the true replay: the answers are
// right, and only the effects show the defect.
func writesTwiceOnRetry(next http.Handler) http.Handler {
	var mu sync.Mutex
	seen := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		op := operationOf(r)
		mu.Lock()
		again := r.Method != http.MethodGet && seen[op]
		seen[op] = true
		mu.Unlock()
		if again {
			next.ServeHTTP(httptest.NewRecorder(), elsewhere(r, body))
		}
		next.ServeHTTP(w, r)
	})
}

// replayDiffersByOneByte answers a replay with one byte of its body
// changed: the first lowercase letter in upper case.
func replayDiffersByOneByte(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Header().Get(wire.HeaderIdempotentReplayed) == "true" {
			if i := bytes.IndexFunc(body, func(c rune) bool { return c >= 'a' && c <= 'z' }); i >= 0 {
				body[i] -= 'a' - 'A'
			}
		}
		for k, v := range rec.Header() {
			w.Header()[k] = v
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	})
}

// foldsMemberNames matches member names as Go's encoding/json does: it
// folds every name (Amount, ſ for s, K for k) onto the lowercase one the
// service knows, the last of a name given twice winning.
func foldsMemberNames(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if ms, err := members(body); err == nil {
			var folded []member
			at := map[string]int{}
			for _, m := range ms {
				m.name = strings.ToLower(strings.ToUpper(m.name))
				if i, ok := at[m.name]; ok {
					folded[i] = m
					continue
				}
				at[m.name] = len(folded)
				folded = append(folded, m)
			}
			body = object(folded)
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// leaksTenants serves the second tenant as the first.
func leaksTenants(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(wire.HeaderAuthorization) == "Bearer "+tokenB {
			r.Header.Set(wire.HeaderAuthorization, "Bearer "+tokenA)
		}
		next.ServeHTTP(w, r)
	})
}

// keyOnlyReplay compares keys and IDs but not bodies: a write with a key
// or ID seen before is served with the body it first came with.
func keyOnlyReplay(next http.Handler) http.Handler {
	var mu sync.Mutex
	first := map[string][]byte{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodGet {
			mu.Lock()
			if b, ok := first[operationOf(r)]; ok {
				body = b
			} else {
				first[operationOf(r)] = body
			}
			mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		r.ContentLength = int64(len(body))
		next.ServeHTTP(w, r)
	})
}

// staleIfMatchIs412 answers 412 to a conditional write whose If-Match it
// has seen before, as a service does that compares the version alone.
func staleIfMatchIs412(next http.Handler) http.Handler {
	var mu sync.Mutex
	seen := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m := r.Header.Get(wire.HeaderIfMatch); m != "" {
			mu.Lock()
			again := seen[operationOf(r)+" "+m]
			seen[operationOf(r)+" "+m] = true
			mu.Unlock()
			if again {
				w.Header().Set(wire.HeaderContentType, wire.ContentTypeProblem)
				w.WriteHeader(http.StatusPreconditionFailed)
				_, _ = io.WriteString(w, `{"type":"about:blank","title":"Precondition failed","status":412,"code":"precondition_failed"}`)
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// racesOnTheKey lets two identical requests that arrive together both
// write, as a check of the key and then a write of it, not one statement,
// would: the first of a key waits for the second, which becomes a write
// of its own (another key or ID).
func racesOnTheKey(next http.Handler) http.Handler {
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		op := operationOf(r)
		mu.Lock()
		ch, second := waiting[op]
		if !second {
			ch = make(chan struct{})
			waiting[op] = ch
		} else if ch != nil {
			close(ch)
			waiting[op] = nil
		} else {
			second = false // a later one: served as it is
		}
		mu.Unlock()
		switch {
		case second:
			r = elsewhere(r, body)
		case ch != nil:
			select {
			case <-ch:
			case <-r.Context().Done():
				return
			}
		}
		next.ServeHTTP(w, r)
	})
}

// TestKitFindsPlantedDefects: for each defect, the check that guards
// against it fails, saying why; the service without a defect passes every
// check in the same fake TB.
func TestKitFindsPlantedDefects(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		plant  planted
		kind   Kind
		check  string // the check that must fail
		reason string // in what it reports
		only   bool   // run that check alone (the defect would stall the others)
	}{
		{"writes twice on a retry (POST)", writesTwiceOnRetry, PostWithKey, "LostAnswer", "new effects (CountFunc), want 1", false},
		{"writes twice on a retry (PUT)", writesTwiceOnRetry, PutCreateOnly, "LostAnswer", "new effects (CountFunc), want 1", false},
		{"a replay differs by one byte (PUT)", replayDiffersByOneByte, PutCreateOrReplace, "LostAnswer", "the bodies differ from byte", false},
		{"a replay differs by one byte (POST)", replayDiffersByOneByte, PostWithKey, "LostAnswer", "the bodies differ from byte", false},
		{"a replay differs by one byte (conditional PATCH)", replayDiffersByOneByte, Patch, "ConditionalLostAnswer", "the bodies differ from byte", false},
		{"member names match loosely (PUT)", foldsMemberNames, PutCreateOnly, "MemberNames", `(U+212A) for "sku": 201`, false},
		{"member names match loosely (POST)", foldsMemberNames, PostWithKey, "MemberNames", `"Counter" for "counter": 201`, false},
		{"tenants leak (PUT)", leaksTenants, PutCreateOrReplace, "OtherTenant", "GET of the first tenant's resource: 200", false},
		{"tenants leak (POST)", leaksTenants, PostWithKey, "OtherTenant", "GET of the first tenant's resource: 200", false},
		{"a key replays another body (POST)", keyOnlyReplay, PostWithKey, "DifferentBody", "want 422 idempotency_key_reuse", false},
		{"a key replays another body (PUT)", keyOnlyReplay, PutCreateOnly, "DifferentBody", "want 422 idempotency_key_reuse", false},
		{"a stale If-Match on a retry is 412 (PUT)", staleIfMatchIs412, PutCreateOrReplace, "ConditionalLostAnswer", "412", false},
		{"a stale If-Match on a retry is 412 (PATCH)", staleIfMatchIs412, Patch, "ConditionalLostAnswer", "412", false},
		{"two requests at once both write (POST)", racesOnTheKey, PostWithKey, "Concurrent", "different answers", true},
		{"two requests at once both write (PUT)", racesOnTheKey, PutCreateOnly, "Concurrent", "different answers", true},
		{"no defect", nil, PostWithKey, "", "", false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := newTestService(t, testdb.New(t, "sqlite"))
			cfg := s.config(c.kind)
			if c.plant != nil {
				cfg.Handler = c.plant(s.handler)
			}
			var only []string
			if c.only {
				only = []string{c.check}
			}
			verdicts := runFake(t, cfg, only...)
			for name, v := range verdicts {
				t.Logf("%s: failed %t, skipped %t\n%s", name, v.failed, v.skipped, v.log)
			}
			if c.check == "" {
				for name, v := range verdicts {
					if v.failed {
						t.Errorf("%s failed on the service without a defect:\n%s", name, v.log)
					}
				}
				if len(verdicts) != len(checks) {
					t.Fatalf("%d checks ran, want %d", len(verdicts), len(checks))
				}
				return
			}
			v, ok := verdicts[c.check]
			if !ok || !v.failed {
				t.Fatalf("%s did not fail on the defect %q", c.check, c.name)
			}
			if !strings.Contains(v.log, c.reason) {
				t.Fatalf("%s failed without saying %q:\n%s", c.check, c.reason, v.log)
			}
		})
	}
}
