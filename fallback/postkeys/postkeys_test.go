package postkeys_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

func TestPhasedCreateReplayAndKeyReuse(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, nil)
		first := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, first, http.StatusCreated)
		if first.Header.Get("Location") == "" || first.Header.Get("X-Not-Stored") != "" {
			t.Fatalf("headers are not the allow-list: %v", first.Header)
		}
		if first.Header.Get("Idempotency-Key") != "k1" || first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first response headers: %v", first.Header)
		}
		again := h.post("/v1/widgets", tokenA, "k1", ` { "name" : "w1" } `)
		wantReplay(t, again, first)
		other := h.post("/v1/widgets", tokenA, "k1", `{"name":"w2"}`)
		wantStatus(t, other, http.StatusUnprocessableEntity)
		if other.code(t) != "idempotency_key_reuse" {
			t.Fatalf("code %s", other.code(t))
		}
		if n := h.widgetsCount(); n != 1 || h.widgets.runs.Load() != 1 {
			t.Fatalf("widgets = %d, runs = %d, want 1 and 1", n, h.widgets.runs.Load())
		}
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordCompleted || rec.RecoveryPoint != "widget_created" || rec.Attempt != 1 ||
			rec.ResponseStatus != http.StatusCreated || string(rec.ResponseBody) != string(first.Body) ||
			rec.ResourceRef == "" || !rec.ExpiresAt.Equal(rec.UpdatedAt.Add(24*time.Hour)) {
			t.Fatalf("record %+v", rec)
		}
		// Another tenant's same key is another record.
		b := h.post("/v1/widgets", tokenB, "k1", `{"name":"w1"}`)
		wantStatus(t, b, http.StatusCreated)
		if b.Header.Get("Idempotent-Replayed") != "" || string(b.Body) == string(first.Body) {
			t.Fatalf("tenant b got tenant a's response: %s", b.Body)
		}
	})
}

func TestPhasedRejectionIsStored(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, nil)
		first := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1","decline":true}`)
		wantStatus(t, first, http.StatusPaymentRequired)
		if first.code(t) != "card_declined" {
			t.Fatalf("code %s", first.code(t))
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"decline":true,"name":"w1"}`), first)
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordCompleted || rec.ErrorCode != "card_declined" || rec.ResponseStatus != 402 {
			t.Fatalf("record %+v", rec)
		}
	})
}

func TestPhasedErrorBeforeSideEffectReleasesKey(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		var fail atomic.Bool
		fail.Store(true)
		h := setup(t, dsn, func(_ *postkeys.Config, w *widgets) {
			w.beforePhase = func(int64) error {
				if fail.Load() {
					return errors.New("database hiccup")
				}
				return nil
			}
		})
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusInternalServerError)
		if r.Header.Get("Idempotency-Key") != "k1" {
			t.Fatalf("key not echoed on an error: %v", r.Header)
		}
		h.noRecord("a", "widgets", "k1")
		fail.Store(false)
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusCreated)
		if n := h.widgetsCount(); n != 1 {
			t.Fatalf("widgets = %d", n)
		}
	})
}

func TestPhasedErrorAfterSideEffectIsUnknownThenReconciled(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		var providerDown, reconcileFails atomic.Bool
		h := setup(t, dsn, func(_ *postkeys.Config, w *widgets) {
			w.afterPhase = func(int64) error {
				if providerDown.Load() {
					return errors.New("provider timeout")
				}
				return nil
			}
			w.reconcileErr = func() error {
				if reconcileFails.Load() {
					return errors.New("provider still down")
				}
				return nil
			}
		})
		// Inline: the retry reconciles.
		providerDown.Store(true)
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusConflict)
		if r.code(t) != "outcome_pending" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("first answer %s %v", r.Body, r.Header)
		}
		if rec := h.record("a", "widgets", "k1"); rec.State != store.RecordUnknown || rec.RecoveryPoint != "widget_created" {
			t.Fatalf("record %+v", rec)
		}
		// The janitor never deletes it, even long after.
		h.clock.Advance(48 * time.Hour)
		if _, err := h.keys.CleanupOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		retry := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, retry, http.StatusCreated)
		if h.widgets.reconciles.Load() != 1 || h.widgets.runs.Load() != 1 || h.widgetsCount() != 1 {
			t.Fatalf("reconciles %d runs %d widgets %d", h.widgets.reconciles.Load(), h.widgets.runs.Load(), h.widgetsCount())
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), retry)

		// Worker: unknown stays unknown while reconcile fails, then settles.
		reconcileFails.Store(true)
		wantStatus(t, h.post("/v1/widgets", tokenA, "k2", `{"name":"w2"}`), http.StatusConflict)
		stats, err := h.keys.RecoverOnce(context.Background())
		if err != nil || stats.Unknown != 1 || stats.Completed != 0 {
			t.Fatalf("recover: %+v %v", stats, err)
		}
		if g := h.gauge("retrysafe_postkeys_unknown_records"); g != 1 {
			t.Fatalf("unknown gauge = %v", g)
		}
		if rec := h.record("a", "widgets", "k2"); rec.State != store.RecordUnknown || rec.Attempt != 2 {
			t.Fatalf("record %+v", rec)
		}
		still := h.post("/v1/widgets", tokenA, "k2", `{"name":"w2"}`)
		wantStatus(t, still, http.StatusConflict)
		if still.code(t) != "outcome_pending" {
			t.Fatalf("code %s", still.code(t))
		}
		reconcileFails.Store(false)
		stats, err = h.keys.RecoverOnce(context.Background())
		if err != nil || stats.Completed != 1 {
			t.Fatalf("recover: %+v %v", stats, err)
		}
		if g := h.gauge("retrysafe_postkeys_unknown_records"); g != 0 {
			t.Fatalf("unknown gauge = %v", g)
		}
		r2 := h.post("/v1/widgets", tokenA, "k2", `{"name":"w2"}`)
		wantStatus(t, r2, http.StatusCreated)
		if r2.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("not a replay: %v", r2.Header)
		}
		if h.widgetsCount() != 2 || h.widgets.runs.Load() != 2 {
			t.Fatalf("widgets %d runs %d", h.widgetsCount(), h.widgets.runs.Load())
		}
	})
}

// TestCrashWindowBusinessWriteCommittedRecordNot is crash window (1): the
// phase's business row committed, then the process died before the record
// was completed. Recovery completes it from the business row.
func TestCrashWindowBusinessWriteCommittedRecordNot(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			w.failPoint = crashOnce(failpoint.BeforeComplete)
		})
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusInternalServerError)
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordInProgress || rec.RecoveryPoint != "widget_created" || h.widgetsCount() != 1 {
			t.Fatalf("after the crash: %+v, widgets %d", rec, h.widgetsCount())
		}
		// The lease is live: a retry waits briefly, then 409.
		busy := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, busy, http.StatusConflict)
		if busy.code(t) != "request_in_progress" || busy.Header.Get("Retry-After") == "" {
			t.Fatalf("busy answer %s %v", busy.Body, busy.Header)
		}
		// Nothing to recover yet; then the lease runs out.
		if stats, err := h.keys.RecoverOnce(context.Background()); err != nil || stats != (postkeys.RecoverStats{}) {
			t.Fatalf("recover before lease end: %+v %v", stats, err)
		}
		h.clock.Advance(time.Minute)
		// The gauge is read at scrape time on the database clock: current
		// before any worker run (the minute the clocks just moved, plus a
		// few ms of real time).
		if g := h.gauge("retrysafe_postkeys_oldest_in_progress_age_seconds"); g < 60 || g >= 65 {
			t.Fatalf("gauge before a run = %v, want about 60", g)
		}
		stats, err := h.keys.RecoverOnce(context.Background())
		if err != nil || stats.Completed != 1 {
			t.Fatalf("recover: %+v %v", stats, err)
		}
		rec = h.record("a", "widgets", "k1")
		if rec.State != store.RecordCompleted || rec.Attempt != 2 || rec.ResponseStatus != http.StatusCreated {
			t.Fatalf("recovered record %+v", rec)
		}
		replay := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, replay, http.StatusCreated)
		if replay.Header.Get("Idempotent-Replayed") != "true" || string(replay.Body) != string(rec.ResponseBody) {
			t.Fatalf("replay %v %s", replay.Header, replay.Body)
		}
		if h.widgetsCount() != 1 || h.widgets.runs.Load() != 1 || h.widgets.reconciles.Load() != 1 {
			t.Fatalf("widgets %d runs %d reconciles %d", h.widgetsCount(), h.widgets.runs.Load(), h.widgets.reconciles.Load())
		}
	})
}

// TestCrashWindowRetryResumesFromRecoveryPoint: after a crash right after
// the phase committed, a retry past the lease takes over and resumes from
// the recovery point, without a second business write.
func TestCrashWindowRetryResumesFromRecoveryPoint(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			w.failPoint = crashOnce(failpoint.AfterPhase + "widget_created")
		})
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusInternalServerError)
		h.clock.Advance(10 * time.Second)
		if _, err := h.keys.RecoverOnce(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The age is on the database clock, which also ran for real.
		if g := h.gauge("retrysafe_postkeys_oldest_in_progress_age_seconds"); g < 10 || g >= 15 {
			t.Fatalf("oldest in_progress age = %v, want 10 (+ the test's own run time)", g)
		}
		h.clock.Advance(lease)
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("a resumed attempt is not a replay: %v", r.Header)
		}
		rec := h.record("a", "widgets", "k1")
		if rec.Attempt != 2 || rec.State != store.RecordCompleted {
			t.Fatalf("record %+v", rec)
		}
		if h.widgetsCount() != 1 || h.widgets.runs.Load() != 2 {
			t.Fatalf("widgets %d runs %d, want 1 and 2", h.widgetsCount(), h.widgets.runs.Load())
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), r)
	})
}

// TestLeaseTakeoverAndFencing: attempt 1 stalls past its lease; two retries
// race for the record and exactly one takes it over; when attempt 1 wakes
// up its phase writes nothing.
func TestLeaseTakeoverAndFencing(t *testing.T) {
	for _, stall := range []string{"before_phase", "before_complete"} {
		t.Run(stall, func(t *testing.T) {
			testdb.Run(t, func(t *testing.T, dsn string) {
				entered, release := make(chan struct{}), make(chan struct{})
				h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
					cfg.InProgressWait = -1
					hook := func(attempt int64) error {
						if attempt == 1 {
							close(entered)
							<-release
						}
						return nil
					}
					if stall == "before_phase" {
						w.beforePhase = hook
					} else {
						w.afterPhase = hook
					}
				})
				zombie := make(chan response, 1)
				go func() { zombie <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
				<-entered
				h.clock.Advance(lease + time.Second)

				var wg sync.WaitGroup
				results := make([]response, 2)
				for i := range results {
					wg.Add(1)
					go func() {
						defer wg.Done()
						results[i] = h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
					}()
				}
				wg.Wait()
				var winner response
				created := 0
				for _, r := range results {
					switch {
					case r.Status == http.StatusCreated:
						created++
						if r.Header.Get("Idempotent-Replayed") == "" {
							winner = r
						}
					case r.Status == http.StatusConflict && r.code(t) == "request_in_progress":
					default:
						t.Fatalf("retry answered %d %s", r.Status, r.Body)
					}
				}
				if winner.Status != http.StatusCreated || h.widgets.runs.Load() != 2 {
					t.Fatalf("takeovers: runs = %d, results %d/%d", h.widgets.runs.Load(), results[0].Status, results[1].Status)
				}
				rec := h.record("a", "widgets", "k1")
				if rec.Attempt != 2 || rec.State != store.RecordCompleted {
					t.Fatalf("record %+v", rec)
				}
				close(release)
				z := <-zombie
				wantReplay(t, z, winner)
				after := h.record("a", "widgets", "k1")
				if after.Attempt != 2 || string(after.ResponseBody) != string(rec.ResponseBody) || !after.UpdatedAt.Equal(rec.UpdatedAt) {
					t.Fatalf("the zombie wrote: %+v", after)
				}
				if n := h.widgetsCount(); n != 1 {
					t.Fatalf("widgets = %d, want 1", n)
				}
			})
		})
	}
}

func TestExpiredRecordExecutesAnew(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, nil)
		first := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, first, http.StatusCreated)
		// The database clock keeps running under the offset: a margin of
		// a few seconds stands for "just before the end".
		h.clock.Advance(24*time.Hour - 5*time.Second)
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), first)
		h.clock.Advance(5 * time.Second)
		h.noRecord("a", "widgets", "k1")
		// Expired: a different command is no reuse, it is a new execution.
		again := h.post("/v1/widgets", tokenA, "k1", `{"name":"w2"}`)
		wantStatus(t, again, http.StatusCreated)
		if again.Header.Get("Idempotent-Replayed") != "" || h.widgetsCount() != 2 {
			t.Fatalf("not executed anew: %v, widgets %d", again.Header, h.widgetsCount())
		}
		if rec := h.record("a", "widgets", "k1"); rec.Attempt != 2 || rec.RecoveryPoint != "widget_created" {
			t.Fatalf("reclaimed record %+v", rec)
		}
	})
}

func TestJanitorDeletesOnlyExpiredCompletedInBatches(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.CleanupBatchSize = 2
			w.failPoint = func(ctx context.Context, op, point string) error {
				if point == failpoint.BeforeComplete {
					return errors.New("crash")
				}
				return nil
			}
		})
		for _, key := range []string{"c1", "c2", "c3", "c4", "c5"} {
			wantStatus(t, h.post("/v1/counters", tokenA, key, `{"by":1}`), http.StatusOK)
		}
		wantStatus(t, h.post("/v1/widgets", tokenA, "stuck", `{"name":"w"}`), http.StatusInternalServerError)
		h.clock.Advance(time.Hour)
		wantStatus(t, h.post("/v1/counters", tokenA, "fresh", `{"by":1}`), http.StatusOK)
		h.clock.Advance(24*time.Hour - time.Minute)
		stats, err := h.keys.CleanupOnce(context.Background())
		if err != nil || stats.Deleted != 5 || stats.Batches != 3 {
			t.Fatalf("cleanup: %+v %v", stats, err)
		}
		if n := h.count("SELECT count(*) FROM idempotency_records"); n != 2 {
			t.Fatalf("rows left = %d, want 2 (fresh, stuck)", n)
		}
		h.record("a", "counters", "fresh")
		if rec := h.record("a", "widgets", "stuck"); rec.State != store.RecordInProgress {
			t.Fatalf("stuck %+v", rec)
		}
	})
}

func TestLocalOperationAndOptionalKey(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, nil)
		first := h.post("/v1/counters", tokenA, "k1", `{"by":5}`)
		wantStatus(t, first, http.StatusOK)
		h.clock.Advance(time.Second)
		wantReplay(t, h.post("/v1/counters", tokenA, "k1", ` { "by" : 5 } `), first)
		// Optional key: without one every request executes and nothing is stored.
		for range 2 {
			r := h.post("/v1/counters", tokenA, "", `{"by":1}`)
			wantStatus(t, r, http.StatusOK)
			if r.Header.Get("Idempotency-Key") != "" || r.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("headers %v", r.Header)
			}
		}
		if v := h.count("SELECT value FROM counters WHERE tenant_id = 'a'"); v != 7 {
			t.Fatalf("counter = %d, want 7", v)
		}
		if n := h.count("SELECT count(*) FROM idempotency_records"); n != 1 {
			t.Fatalf("records = %d, want 1", n)
		}
	})
}

func TestWorkersStartAndStop(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.RecoveryInterval = 5 * time.Millisecond
			cfg.CleanupInterval = 5 * time.Millisecond
			w.afterPhase = func(attempt int64) error {
				if attempt == 1 {
					return errors.New("provider timeout")
				}
				return nil
			}
		})
		wantStatus(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), http.StatusConflict)
		if err := h.keys.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := h.keys.Start(context.Background()); !errors.Is(err, postkeys.ErrRunning) {
			t.Fatalf("second Start: %v", err)
		}
		deadline := time.Now().Add(30 * time.Second)
		for h.record("a", "widgets", "k1").State != store.RecordCompleted {
			if time.Now().After(deadline) {
				t.Fatal("the recovery worker did not settle the record")
			}
			time.Sleep(5 * time.Millisecond)
		}
		h.keys.Stop()
		h.keys.Stop()
	})
}

func TestRegisterRejectsBadOperations(t *testing.T) {
	h := setup(t, testdb.New(t, "sqlite"), nil)
	noop := func(context.Context, *postkeys.Run[widgetCmd]) (postkeys.Response, error) {
		return postkeys.Response{}, nil
	}
	for name, op := range map[string]postkeys.Operation[widgetCmd]{
		"no name":        {RunFunc: noop, ReconcileFunc: noop, Mode: postkeys.Phased},
		"duplicate":      {Name: "widgets", RunFunc: noop, ReconcileFunc: noop, Mode: postkeys.Phased},
		"local no exec":  {Name: "x1"},
		"phased no hook": {Name: "x2", Mode: postkeys.Phased, RunFunc: noop},
		"bad rejection":  {Name: "x3", Mode: postkeys.Phased, RunFunc: noop, ReconcileFunc: noop, RejectionCodes: []wire.Code{wire.CodeValidationFailed}},
		"server error":   {Name: "x4", Mode: postkeys.Phased, RunFunc: noop, ReconcileFunc: noop, RejectionCodes: []wire.Code{wire.CodeUnavailable}},
	} {
		if _, err := postkeys.Register(h.keys, op); err == nil {
			t.Errorf("%s: Register accepted it", name)
		}
	}
}

func TestStoredBodyCapRerendersFromResource(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(cfg *postkeys.Config, _ *widgets) { cfg.MaxStoredBody = 16 })
		first := h.post("/v1/widgets", tokenA, "k1", `{"name":"a widget with a long name"}`)
		wantStatus(t, first, http.StatusCreated)
		rec := h.record("a", "widgets", "k1")
		if !rec.Truncated || len(rec.ResponseBody) != 0 || rec.ResourceRef == "" || storedHeader(rec).Get("Location") == "" {
			t.Fatalf("record %+v", rec)
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"a widget with a long name"}`), first)

		// A local operation without a RenderFunc cannot store a body over
		// the cap: an internal error, and nothing is committed.
		r := h.post("/v1/counters", tokenA, "c1", `{"by":1}`)
		wantStatus(t, r, http.StatusInternalServerError)
		h.noRecord("a", "counters", "c1")
		if n := h.count("SELECT count(*) FROM counters"); n != 0 {
			t.Fatalf("counters = %d", n)
		}
	})
}

// TestRetryWaitsForRunningAttemptThenReplays: a retry that finds a live
// lease polls, and replays once the first attempt completes.
func TestRetryWaitsForRunningAttemptThenReplays(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		entered, release := make(chan struct{}), make(chan struct{})
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.InProgressWait = 10 * time.Second
			w.beforePhase = func(attempt int64) error {
				if attempt == 1 {
					close(entered)
					<-release
				}
				return nil
			}
		})
		firstc := make(chan response, 1)
		go func() { firstc <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-entered
		retryc := make(chan response, 1)
		go func() { retryc <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		time.Sleep(30 * time.Millisecond) // let the retry find the record in progress
		close(release)
		first := <-firstc
		wantStatus(t, first, http.StatusCreated)
		wantReplay(t, <-retryc, first)
		if h.widgets.runs.Load() != 1 {
			t.Fatalf("runs = %d", h.widgets.runs.Load())
		}
	})
}

func TestTransitionsAreLoggedWithTheKeyHashOnly(t *testing.T) {
	h := setup(t, testdb.New(t, "sqlite"), nil)
	const key = "very-secret-key-42"
	wantStatus(t, h.post("/v1/widgets", tokenA, key, `{"name":"w1"}`), http.StatusCreated)
	wantStatus(t, h.post("/v1/widgets", tokenA, key, `{"name":"w1"}`), http.StatusCreated)
	logs := h.logs.String()
	if strings.Contains(logs, key) {
		t.Fatalf("the raw key is in the logs:\n%s", logs)
	}
	var events []string
	for line := range strings.Lines(logs) {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		if ev["key_sha256"] != telemetry.KeyHash(key) || ev["tenant"] != "a" || ev["operation"] != "widgets" ||
			len(ev["fingerprint"].(string)) != 12 || ev["duration"] == nil {
			t.Fatalf("event %v", ev)
		}
		events = append(events, ev["event"].(string)+"/"+ev["state"].(string))
	}
	want := []string{"claimed/in_progress", "phase/in_progress", "completed/completed", "replayed/completed"}
	if !slices.Equal(events, want) {
		t.Fatalf("events %v, want %v", events, want)
	}
}
