package postkeys_test

import (
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// Tests of the three ways a phased attempt commits less: the claim in the
// first phase's transaction (ClaimInFirstPhase), the renewal skipped while
// the lease is fresh (Run.RenewFor) and the last phase committed with the
// stored response (Run.Complete).

func (h *harness) widgetName() string {
	h.t.Helper()
	var names []string
	if err := h.db.Gorm.Raw("SELECT name FROM widgets").Scan(&names).Error; err != nil || len(names) != 1 {
		h.t.Fatalf("widget names %v, %v; want one", names, err)
	}
	return names[0]
}

// TestClaimInFirstPhase: the key is not claimed before the first phase,
// which claims it and commits the widget in one transaction; the request,
// its replay and the record are as without it.
func TestClaimInFirstPhase(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		before := newGate(1)
		h := setup(t, dsn, func(_ *postkeys.Config, w *widgets) {
			w.claimInFirstPhase = true
			w.beforePhase = before.hook
		})
		first := make(chan response, 1)
		go func() { first <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-before.entered
		h.noRecord("a", "widgets", "k1") // RunFunc runs; nothing is claimed yet
		close(before.open)
		r := <-first
		wantStatus(t, r, http.StatusCreated)
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordCompleted || rec.RecoveryPoint != "widget_created" || rec.Attempt != 1 ||
			string(rec.ResponseBody) != string(r.Body) || rec.ResourceRef == "" {
			t.Fatalf("record %+v", rec)
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), r)
		other := h.post("/v1/widgets", tokenA, "k1", `{"name":"w2"}`)
		wantStatus(t, other, http.StatusUnprocessableEntity)
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 1 {
			t.Fatalf("widgets %d, provider calls %d, want 1 and 1", h.widgetsCount(), h.widgets.provider.Load())
		}
		// The replay is answered from the record read first and starts
		// no RunFunc; the key reuse with another body starts one, whose
		// first phase finds the key held.
		if runs := h.widgets.runs.Load(); runs != 2 {
			t.Fatalf("runs %d, want 2 (the create and the key reuse)", runs)
		}
	})
}

// TestClaimInFirstPhaseStalledAttemptLosesTheKey: attempt A stalls before
// its first phase, holding nothing. A retry claims the key in its own first
// phase and stalls after it; A wakes up, its phase finds the key held,
// rolls back without writing and answers 409; once the retry completed, A's
// next retry replays. One widget, one provider call.
func TestClaimInFirstPhaseStalledAttemptLosesTheKey(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		before, after := newGate(1), newGate(1)
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.InProgressWait = -1
			w.claimInFirstPhase = true
			w.beforePhase = before.hook // A, the first run
			w.afterPhase = after.hook   // the retry, the first past its phase
		})
		stalled := make(chan response, 1)
		go func() { stalled <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-before.entered
		retry := make(chan response, 1)
		go func() { retry <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-after.entered
		claimed := h.record("a", "widgets", "k1")
		if claimed.State != store.RecordInProgress || claimed.RecoveryPoint != "widget_created" || claimed.Attempt != 1 {
			t.Fatalf("the retry's record %+v", claimed)
		}
		close(before.open)
		a := <-stalled
		wantStatus(t, a, http.StatusConflict)
		if a.code(t) != "request_in_progress" {
			t.Fatalf("the stalled attempt answered %s", a.Body)
		}
		if rec := h.record("a", "widgets", "k1"); rec.Fence != claimed.Fence || !rec.UpdatedAt.Equal(claimed.UpdatedAt) {
			t.Fatalf("the stalled attempt wrote the record: %+v", rec)
		}
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 0 {
			t.Fatalf("widgets %d, provider calls %d; want the retry's widget and no call yet", h.widgetsCount(), h.widgets.provider.Load())
		}
		close(after.open)
		r := <-retry
		wantStatus(t, r, http.StatusCreated)
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), r)
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 1 {
			t.Fatalf("widgets %d, provider calls %d, want 1 and 1", h.widgetsCount(), h.widgets.provider.Load())
		}
	})
}

// TestClaimInFirstPhaseBeforeAnyPhase: a RunFunc that returns before its
// first phase claims the key then: an error leaves the key free, a
// rejection is stored and replayed.
func TestClaimInFirstPhaseBeforeAnyPhase(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		var (
			mu   sync.Mutex
			fail error
		)
		setFail := func(err error) { mu.Lock(); fail = err; mu.Unlock() }
		h := setup(t, dsn, func(_ *postkeys.Config, w *widgets) {
			w.claimInFirstPhase = true
			w.beforePhase = func(int64) error {
				mu.Lock()
				defer mu.Unlock()
				return fail
			}
		})
		setFail(errors.New("database hiccup"))
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusInternalServerError)
		h.noRecord("a", "widgets", "k1")
		setFail(framework.Errorf(codeDeclined, "declined before anything"))
		declined := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, declined, http.StatusPaymentRequired)
		if rec := h.record("a", "widgets", "k1"); rec.State != store.RecordCompleted || rec.ErrorCode != "card_declined" ||
			rec.RecoveryPoint != postkeys.PointStarted {
			t.Fatalf("record %+v", rec)
		}
		setFail(nil)
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), declined)
		if h.widgetsCount() != 0 || h.widgets.provider.Load() != 0 {
			t.Fatalf("widgets %d, provider calls %d, want none", h.widgetsCount(), h.widgets.provider.Load())
		}
	})
}

// TestClaimInFirstPhaseConcurrentDuplicates: duplicates racing for a fresh
// key each start RunFunc; exactly one first phase claims the key, the
// others find it held. One widget, one provider call, every answer the
// winner's or 409.
func TestClaimInFirstPhaseConcurrentDuplicates(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.InProgressWait = 2 * time.Second
			w.claimInFirstPhase = true
		})
		const n = 8
		out := make([]response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				out[i] = h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
			}()
		}
		wg.Wait()
		var first *response
		for i := range out {
			if out[i].Status == http.StatusCreated && out[i].Header.Get("Idempotent-Replayed") == "" {
				if first != nil {
					t.Fatalf("two executions: %s and %s", first.Body, out[i].Body)
				}
				first = &out[i]
			}
		}
		if first == nil {
			t.Fatal("no request executed")
		}
		for _, r := range out {
			if r.Status == http.StatusConflict && r.code(t) == "request_in_progress" {
				continue
			}
			wantStatus(t, r, http.StatusCreated)
			if string(r.Body) != string(first.Body) {
				t.Fatalf("answers differ: %s and %s", r.Body, first.Body)
			}
		}
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 1 {
			t.Fatalf("widgets %d, provider calls %d, want 1 and 1", h.widgetsCount(), h.widgets.provider.Load())
		}
	})
}

// TestRenewForSkipsOnlyAFreshLease: RunFunc renews with RenewFor(2s) after
// its phase, once the test has moved both clocks on. A second after the
// phase, and when 2s + the 1s margin and ten more seconds are left (the
// real time between the phase and the check, on a loaded machine, comes
// off them), the lease is left exactly as the phase set it: no statement (a renewal would
// have moved it by the shift). With less than 2s + the margin left on the
// database clock, the lease is renewed from the database clock; past its
// end the attempt is fenced and never calls the provider (as with Renew,
// TestStalledAttemptRenewsBeforeTheProvider).
func TestRenewForSkipsOnlyAFreshLease(t *testing.T) {
	const step = 2 * time.Second
	for _, tc := range []struct {
		name    string
		shift   time.Duration
		renewed bool
	}{
		{"fresh", time.Second, false},
		{"enough left", lease - step - time.Second - 10*time.Second, false},
		{"too little left", lease - step, true},
		{"ended", lease + time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testdb.Run(t, func(t *testing.T, dsn string) {
				var phased, renewed store.RecordRow
				var h *harness
				h = setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
					cfg.InProgressWait = -1
					w.renewFor = step
					w.afterPhase = func(int64) error {
						phased = h.record("a", "widgets", "k1")
						h.clock.Advance(tc.shift)
						return nil
					}
					w.beforeProvider = func(int64) error {
						renewed = h.record("a", "widgets", "k1")
						return nil
					}
				})
				r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
				if tc.shift > lease {
					wantStatus(t, r, http.StatusConflict)
					if h.widgets.provider.Load() != 0 || renewed.Fence != 0 {
						t.Fatalf("an attempt past its lease went on to the provider (%d calls)", h.widgets.provider.Load())
					}
					if rec := h.record("a", "widgets", "k1"); !rec.LockedUntil.Equal(phased.LockedUntil) || !rec.UpdatedAt.Equal(phased.UpdatedAt) {
						t.Fatalf("the fenced attempt wrote its record: %+v, after its phase %+v", rec, phased)
					}
					return
				}
				wantStatus(t, r, http.StatusCreated)
				if h.widgets.provider.Load() != 1 {
					t.Fatalf("provider calls %d, want 1", h.widgets.provider.Load())
				}
				same := renewed.LockedUntil.Equal(phased.LockedUntil) && renewed.UpdatedAt.Equal(phased.UpdatedAt)
				if tc.renewed {
					// Renewed from the shifted database clock: a whole lease
					// from about shift after the phase.
					if same || renewed.LockedUntil.Sub(phased.LockedUntil) < tc.shift-time.Second {
						t.Fatalf("lease after the phase %v, before the call %v: want it renewed by about %v",
							phased.LockedUntil, renewed.LockedUntil, tc.shift)
					}
				} else if !same {
					t.Fatalf("lease after the phase %v (updated %v), before the call %v (updated %v): want no renewal",
						phased.LockedUntil, phased.UpdatedAt, renewed.LockedUntil, renewed.UpdatedAt)
				}
			})
		})
	}
}

// TestRenewForAfterATakeover: a retry that takes over the record of an
// attempt that died after its phase resumes there with the lease its
// takeover just set, so it skips the renewal too.
func TestRenewForAfterATakeover(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		var taken, renewed store.RecordRow
		var h *harness
		h = setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			w.failPoint = crashOnce(failpoint.AfterPhase + "widget_created")
			w.renewFor = 2 * time.Second
			w.afterPhase = func(int64) error {
				taken = h.record("a", "widgets", "k1")
				h.clock.Advance(time.Second) // a renewal would move the lease
				return nil
			}
			w.beforeProvider = func(int64) error {
				renewed = h.record("a", "widgets", "k1")
				return nil
			}
		})
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusInternalServerError)
		h.clock.Advance(lease + time.Second)
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusCreated)
		if taken.Attempt != 2 || taken.State != store.RecordInProgress || !renewed.LockedUntil.Equal(taken.LockedUntil) ||
			!renewed.UpdatedAt.Equal(taken.UpdatedAt) {
			t.Fatalf("after the takeover %+v, before the call %+v: want the takeover's lease, not renewed", taken, renewed)
		}
		if h.widgets.provider.Load() != 1 || h.widgetsCount() != 1 {
			t.Fatalf("provider calls %d, widgets %d", h.widgets.provider.Load(), h.widgetsCount())
		}
	})
}

// TestCompleteCommitsTheLastPhaseWithTheOutcome: Run.Complete stores the
// last phase's writes, its recovery point and the response in one
// transaction; a rejection keeps the phase's writes and is replayed.
func TestCompleteCommitsTheLastPhaseWithTheOutcome(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(_ *postkeys.Config, w *widgets) {
			w.complete = true
			w.claimInFirstPhase = true
			w.renewFor = 2 * time.Second
		})
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordCompleted || rec.RecoveryPoint != "widget_done" || string(rec.ResponseBody) != string(r.Body) ||
			storedHeader(rec).Get("Location") == "" || rec.ResourceRef == "" || !rec.LockedUntil.IsZero() {
			t.Fatalf("record %+v", rec)
		}
		if name := h.widgetName(); name != "w1!" {
			t.Fatalf("widget %q, want the last phase's update", name)
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), r)

		if err := h.db.Gorm.Exec("DELETE FROM widgets").Error; err != nil {
			t.Fatal(err)
		}
		declined := h.post("/v1/widgets", tokenA, "k2", `{"name":"w2","decline":true}`)
		wantStatus(t, declined, http.StatusPaymentRequired)
		rec = h.record("a", "widgets", "k2")
		if rec.State != store.RecordCompleted || rec.RecoveryPoint != "widget_done" || rec.ErrorCode != "card_declined" {
			t.Fatalf("record %+v", rec)
		}
		if name := h.widgetName(); name != "w2!" {
			t.Fatalf("widget %q: a rejection keeps the last phase's writes", name)
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k2", `{"name":"w2","decline":true}`), declined)
		if h.widgets.provider.Load() != 2 {
			t.Fatalf("provider calls %d, want 2", h.widgets.provider.Load())
		}
	})
}

// TestCompleteFencedWritesNothing: an attempt whose lease ended before its
// last phase commits neither the phase's writes nor the outcome; the retry
// that takes over resumes from the previous point.
func TestCompleteFencedWritesNothing(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		var stalls atomic.Int64
		var h *harness
		h = setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.InProgressWait = -1
			w.complete = true
			w.beforeProvider = func(int64) error {
				if stalls.Add(1) == 1 {
					h.clock.Advance(lease + time.Second)
				}
				return nil
			}
		})
		stale := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, stale, http.StatusConflict)
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordInProgress || rec.RecoveryPoint != "widget_created" || h.widgetName() != "w1" {
			t.Fatalf("record %+v, widget %q: the fenced last phase wrote", rec, h.widgetName())
		}
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		if rec := h.record("a", "widgets", "k1"); rec.Attempt != 2 || rec.RecoveryPoint != "widget_done" || h.widgetName() != "w1!" {
			t.Fatalf("record %+v, widget %q", rec, h.widgetName())
		}
	})
}

// TestCompleteCrashBeforeItsCommit: Run.Complete's phase and outcome
// commit together with fail points set as without, so a crash at
// failpoint.BeforeComplete leaves the record at the previous recovery point
// and the phase's writes undone; the retry past the lease resumes there,
// calls the provider again (a real one is asked with the same downstream
// key) and completes. A body over the cap is stored truncated and
// re-rendered on replay.
func TestCompleteCrashBeforeItsCommit(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.MaxStoredBody = 16
			w.failPoint = crashOnce(failpoint.BeforeComplete)
			w.complete = true
		})
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusInternalServerError)
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordInProgress || rec.RecoveryPoint != "widget_created" || h.widgetName() != "w1" ||
			h.widgets.provider.Load() != 1 {
			t.Fatalf("record %+v, widget %q, provider calls %d: want the first phase only", rec, h.widgetName(), h.widgets.provider.Load())
		}
		h.clock.Advance(lease + time.Second)
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		if h.widgets.provider.Load() != 2 || h.widgetName() != "w1!" || h.widgetsCount() != 1 {
			t.Fatalf("provider calls %d, widget %q", h.widgets.provider.Load(), h.widgetName())
		}
		if rec := h.record("a", "widgets", "k1"); rec.State != store.RecordCompleted || !rec.Truncated || rec.Attempt != 2 {
			t.Fatalf("record %+v", rec)
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), r)
	})
}

// TestCompleteCrashAfterItsCommit: a crash right after Run.Complete's
// transaction (its failpoint.AfterPhase) leaves the outcome stored and the
// client without an answer, a lost response: the retry replays it, with no
// other run and no other provider call.
func TestCompleteCrashAfterItsCommit(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			w.failPoint = crashOnce(failpoint.AfterPhase + "widget_done")
			w.complete = true
			w.claimInFirstPhase = true
		})
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusInternalServerError)
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordCompleted || rec.RecoveryPoint != "widget_done" || h.widgetName() != "w1!" {
			t.Fatalf("record %+v, widget %q: want the outcome stored", rec, h.widgetName())
		}
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "true" || string(r.Body) != string(rec.ResponseBody) {
			t.Fatalf("not the stored outcome: %v %s", r.Header, r.Body)
		}
		// The replay is answered from the record read first: no other
		// run of RunFunc.
		if h.widgets.provider.Load() != 1 || h.widgets.runs.Load() != 1 || h.widgetsCount() != 1 {
			t.Fatalf("provider calls %d, runs %d, widgets %d", h.widgets.provider.Load(), h.widgets.runs.Load(), h.widgetsCount())
		}
	})
}

// TestCompleteStoresATruncatedBody: Run.Complete stores a body over the
// cap as the completion does: truncated, re-rendered on replay.
func TestCompleteStoresATruncatedBody(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.MaxStoredBody = 16
			w.complete = true
		})
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		if rec := h.record("a", "widgets", "k1"); rec.State != store.RecordCompleted || !rec.Truncated || rec.ResponseBody != nil {
			t.Fatalf("record %+v", rec)
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), r)
	})
}
