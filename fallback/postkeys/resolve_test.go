package postkeys_test

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

// pausingWorker is a spy on the record statements whose ListUnfinished, once pauseNext was
// called, signals reached after its read and waits for resume before it
// returns: a recovery worker that has read a record (and its fence) and
// not yet taken it over, outside any transaction.
type pausingWorker struct {
	store.Records
	mu              sync.Mutex
	reached, resume chan struct{}
}

func (p *pausingWorker) pauseNext() (reached, resume chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reached, p.resume = make(chan struct{}), make(chan struct{})
	return p.reached, p.resume
}

func (p *pausingWorker) ListUnfinished(ctx context.Context, db *gorm.DB, lp *store.RecordListUnfinishedParams) ([]store.RecordRow, error) {
	recs, err := p.Records.ListUnfinished(ctx, db, lp)
	p.mu.Lock()
	reached, resume := p.reached, p.resume
	p.reached, p.resume = nil, nil
	p.mu.Unlock()
	if reached != nil {
		close(reached)
		<-resume
	}
	return recs, err
}

// resolveHarness is the harness with a provider that can lose its answer
// (the record is left unknown), a reconcile hook that can block, and a
// recovery worker that can pause; the operator's Resolve runs on the
// database's own record statements.
type resolveHarness struct {
	*harness
	worker   *pausingWorker
	mu       sync.Mutex
	lose     bool
	blockRec chan chan struct{}
}

func setupResolve(t *testing.T, dsn string) *resolveHarness {
	rh := &resolveHarness{blockRec: make(chan chan struct{}, 1)}
	rh.harness = setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
		rh.worker = &pausingWorker{}
		w.records = func(r store.Records) store.Records { rh.worker.Records = r; return rh.worker }
		w.afterPhase = func(int64) error {
			rh.mu.Lock()
			defer rh.mu.Unlock()
			if rh.lose {
				return errors.New("provider timeout")
			}
			return nil
		}
		w.reconcileErr = func() error {
			select {
			case entered := <-rh.blockRec:
				// Tell the test the worker holds the lease, and wait.
				entered <- struct{}{}
				<-entered
			default:
			}
			return nil
		}
	})
	return rh
}

// unknown leaves the record of key unknown: the provider's answer is lost
// after the phase committed.
func (rh *resolveHarness) unknown(key string) {
	rh.t.Helper()
	rh.mu.Lock()
	rh.lose = true
	rh.mu.Unlock()
	defer func() { rh.mu.Lock(); rh.lose = false; rh.mu.Unlock() }()
	r := rh.post("/v1/widgets", tokenA, key, `{"name":"w"}`)
	wantStatus(rh.t, r, http.StatusConflict)
	if rec := rh.record("a", "widgets", key); rec.State != store.RecordUnknown {
		rh.t.Fatalf("record %+v, want unknown", rec)
	}
}

func (rh *resolveHarness) resolve(key string, p postkeys.ResolveParams) (postkeys.Resolution, error) {
	p.ID = store.RecordKey{Tenant: "a", Operation: "widgets", Key: key}
	if p.Actor == "" {
		p.Actor, p.Reason = "alice", "ticket 42: charge found at the provider"
	}
	if p.Codes == nil {
		p.Codes = framework.NewCodes()
		if err := p.Codes.Register(wire.CodeInfo{Code: codeDeclined, Status: http.StatusPaymentRequired, Title: "Card declined"}); err != nil {
			rh.t.Fatal(err)
		}
	}
	return postkeys.Resolve(context.Background(), rh.db, p)
}

func (rh *resolveHarness) audits(key string) int64 {
	return rh.count("SELECT count(*) FROM idempotency_resolutions WHERE tenant_id = 'a' AND key_hash = ?", telemetry.KeyHash(key))
}

var succeeded = postkeys.ResolveParams{Outcome: postkeys.OutcomeSucceeded, Reference: "wd_by_hand", Status: http.StatusCreated,
	Body: []byte(`{"id":"wd_by_hand","name":"w"}`)}

// TestResolveUnknownReplaysTheOperatorsAnswer: an operator resolves an
// unknown record; the client's retry replays that answer byte for byte,
// nothing runs again, and one audit row names who and why (by the key's
// hash). A failed outcome replays its code's problem.
func TestResolveUnknownReplaysTheOperatorsAnswer(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		rh := setupResolve(t, dsn)
		rh.unknown("k1")
		res, err := rh.resolve("k1", succeeded)
		if err != nil || res.From != store.RecordUnknown {
			t.Fatalf("Resolve = %+v, %v", res, err)
		}
		retry := rh.post("/v1/widgets", tokenA, "k1", `{"name":"w"}`)
		wantStatus(t, retry, http.StatusCreated)
		if string(retry.Body) != string(succeeded.Body) || retry.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %s %v", retry.Body, retry.Header)
		}
		if rh.widgets.runs.Load() != 1 || rh.widgets.reconciles.Load() != 0 || rh.widgets.provider.Load() != 0 {
			t.Fatalf("runs %d reconciles %d provider calls %d", rh.widgets.runs.Load(), rh.widgets.reconciles.Load(), rh.widgets.provider.Load())
		}
		if n := rh.count("SELECT count(*) FROM idempotency_resolutions WHERE key_hash = ? AND actor = 'alice' AND outcome = 'succeeded' AND reference = 'wd_by_hand' AND status = 201 AND from_state = 'unknown' AND reason LIKE 'ticket 42%'",
			telemetry.KeyHash("k1")); n != 1 {
			t.Fatalf("audit rows = %d", n)
		}
		if n := rh.count("SELECT count(*) FROM idempotency_resolutions WHERE key_hash = 'k1'"); n != 0 {
			t.Fatal("the audit row holds the raw key")
		}
		// Resolved once: a second resolution is refused.
		if _, err := rh.resolve("k1", succeeded); !errors.Is(err, postkeys.ErrNotResolvable) {
			t.Fatalf("second Resolve = %v", err)
		}

		rh.unknown("k2")
		// A code that is not a final answer, or not registered: refused, nothing written.
		for _, code := range []wire.Code{"no_such_code", wire.CodeValidationFailed, wire.CodeOutcomePending, wire.CodeInternal} {
			if _, err := rh.resolve("k2", postkeys.ResolveParams{Outcome: postkeys.OutcomeFailed, Code: code}); !errors.Is(err, postkeys.ErrInvalidResolution) {
				t.Fatalf("Resolve with %s = %v", code, err)
			}
		}
		if rec := rh.record("a", "widgets", "k2"); rec.State != store.RecordUnknown || rh.audits("k2") != 0 {
			t.Fatalf("a refused resolution wrote: %+v", rec)
		}
		if _, err := rh.resolve("k2", postkeys.ResolveParams{Outcome: postkeys.OutcomeFailed, Code: codeDeclined,
			Detail: "refunded by hand"}); err != nil {
			t.Fatal(err)
		}
		failed := rh.post("/v1/widgets", tokenA, "k2", `{"name":"w"}`)
		wantStatus(t, failed, http.StatusPaymentRequired)
		if failed.code(t) != string(codeDeclined) || !strings.Contains(string(failed.Body), "refunded by hand") ||
			failed.Header.Get("Content-Type") != "application/problem+json" || failed.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("failed replay %s %v", failed.Body, failed.Header)
		}
		if _, err := rh.resolve("k-none", succeeded); !errors.Is(err, postkeys.ErrRecordNotFound) {
			t.Fatalf("Resolve of no record = %v", err)
		}
	})
}

// TestResolveChecksTheBodyAndTheWindow: the body an operator stores goes
// through the check every request body does (duplicate keys, NUL, bad
// UTF-8 are refused), and the replay window is at least the lease; a
// refused resolution writes nothing, and the record stays unknown.
func TestResolveChecksTheBodyAndTheWindow(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		rh := setupResolve(t, dsn)
		rh.unknown("k1")
		for _, body := range []string{`{"id":"wd_1","id":"wd_2"}`, `{"id":"wd_1","name":"a\u0000b"}`, "{\"id\":\"\xff\"}", `{"id":"wd_1"} {}`} {
			p := succeeded
			p.Body = []byte(body)
			if _, err := rh.resolve("k1", p); !errors.Is(err, postkeys.ErrInvalidResolution) {
				t.Fatalf("Resolve with body %q = %v, want ErrInvalidResolution", body, err)
			}
		}
		short := succeeded
		short.TTL = time.Millisecond
		if _, err := rh.resolve("k1", short); !errors.Is(err, postkeys.ErrInvalidResolution) || !strings.Contains(err.Error(), "lease") {
			t.Fatalf("Resolve with a 1ms window = %v, want ErrInvalidResolution naming the lease", err)
		}
		// Adapter.Resolve's lease is the adapter's (30s here).
		short.ID, short.Actor, short.Reason, short.TTL = store.RecordKey{Tenant: "a", Operation: "widgets", Key: "k1"}, "alice", "x", lease-time.Second
		if _, err := rh.keys.Resolve(context.Background(), short); !errors.Is(err, postkeys.ErrInvalidResolution) {
			t.Fatalf("Adapter.Resolve with a window under its lease = %v", err)
		}
		if rec := rh.record("a", "widgets", "k1"); rec.State != store.RecordUnknown || rh.audits("k1") != 0 {
			t.Fatalf("a refused resolution wrote: %+v, %d audit rows", rec, rh.audits("k1"))
		}
		atLease := succeeded
		atLease.TTL = postkeys.DefaultResolveLease
		if _, err := rh.resolve("k1", atLease); err != nil {
			t.Fatalf("Resolve with a window of one lease: %v", err)
		}
		if r := rh.post("/v1/widgets", tokenA, "k1", `{"name":"w"}`); string(r.Body) != string(succeeded.Body) || rh.widgets.runs.Load() != 1 {
			t.Fatalf("retry %d %s after %d runs", r.Status, r.Body, rh.widgets.runs.Load())
		}
	})
}

// TestResolveTakesTheOperationsOwnCodes: a failed resolution answers a
// code the record's operation declared (or a generic one), never a code
// the engine knows for another operation. The adapter publishes what its
// operations declare when its workers start, and PublishedCodes reads it
// back for a tool that is not the service.
func TestResolveTakesTheOperationsOwnCodes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		rh := setupResolve(t, dsn)
		quota := wire.CodeInfo{Code: "quota_exceeded", Status: http.StatusConflict, Title: "Quota exceeded"}
		if err := rh.engine.RegisterCodes(quota); err != nil {
			t.Fatal(err)
		}
		if _, err := postkeys.Register(rh.keys, postkeys.Operation[counterCmd]{Name: "quotas", RejectionCodes: []wire.Code{quota.Code},
			ExecuteFunc: func(context.Context, *gorm.DB, postkeys.Request[counterCmd]) (postkeys.Response, error) {
				return postkeys.Response{}, errors.New("not in this test")
			}}); err != nil {
			t.Fatal(err)
		}
		rh.unknown("k1")
		failed := func(code wire.Code) postkeys.ResolveParams {
			return postkeys.ResolveParams{ID: store.RecordKey{Tenant: "a", Operation: "widgets", Key: "k1"},
				Outcome: postkeys.OutcomeFailed, Code: code, Actor: "alice", Reason: "INC-3"}
		}
		if _, err := rh.keys.Resolve(context.Background(), failed(quota.Code)); !errors.Is(err, postkeys.ErrInvalidResolution) {
			t.Fatalf("Adapter.Resolve of widgets with quotas' code = %v, want ErrInvalidResolution", err)
		}
		if rh.audits("k1") != 0 {
			t.Fatal("a refused resolution wrote an audit row")
		}
		if _, err := rh.keys.Resolve(context.Background(), failed(codeDeclined)); err != nil {
			t.Fatalf("Adapter.Resolve of widgets with its own code: %v", err)
		}

		if err := rh.keys.Start(context.Background()); err != nil {
			t.Fatal(err)
		}
		for {
			if _, found, err := rh.db.Driver.Records().GetOperation(context.Background(), rh.db.Gorm, "quotas"); err != nil {
				t.Fatal(err)
			} else if found {
				break
			}
			time.Sleep(5 * time.Millisecond) // polling for the worker's first round
		}
		rh.keys.Stop()
		codes, published, err := postkeys.PublishedCodes(context.Background(), rh.db, "widgets")
		if err != nil || !published {
			t.Fatalf("PublishedCodes(widgets) = %v, %v", published, err)
		}
		if info, ok := codes.Lookup(codeDeclined); !ok || info.Title != "Card declined" {
			t.Fatalf("widgets' published code %+v, %v", info, ok)
		}
		if _, ok := codes.Lookup(quota.Code); ok {
			t.Fatal("widgets' published codes hold quotas' code")
		}
		if _, ok := codes.Lookup(wire.CodeNotFound); !ok {
			t.Fatal("the generic codes are missing")
		}
		if codes, published, err := postkeys.PublishedCodes(context.Background(), rh.db, "nobody"); err != nil || published ||
			len(codes.All()) != len(framework.NewCodes().All()) {
			t.Fatalf("PublishedCodes of an operation nobody published: %v, %v", published, err)
		}
	})
}

// TestResolveRefusesALiveLease: while the recovery worker's attempt holds
// the lease (its reconcile hook is running), a resolution is refused and
// writes nothing; the worker's answer stands. Adapter.Resolve answers a
// succeeded outcome without a body with {"reference":…} and 200.
func TestResolveRefusesALiveLease(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		rh := setupResolve(t, dsn)
		rh.unknown("k1")
		entered := make(chan struct{})
		rh.blockRec <- entered
		done := make(chan postkeys.RecoverStats)
		go func() {
			stats, err := rh.keys.RecoverOnce(context.Background())
			if err != nil {
				t.Error(err)
			}
			done <- stats
		}()
		<-entered
		before := rh.record("a", "widgets", "k1")
		if _, err := rh.resolve("k1", succeeded); !errors.Is(err, postkeys.ErrLeaseHeld) {
			t.Fatalf("Resolve during the worker's attempt = %v", err)
		}
		if after := rh.record("a", "widgets", "k1"); after.Fence != before.Fence || after.State != store.RecordInProgress || rh.audits("k1") != 0 {
			t.Fatalf("a refused resolution wrote: %+v", after)
		}
		entered <- struct{}{}
		if stats := <-done; stats.Completed != 1 {
			t.Fatalf("worker %+v", stats)
		}
		if rec := rh.record("a", "widgets", "k1"); rec.State != store.RecordCompleted || rec.ResourceRef == succeeded.Reference {
			t.Fatalf("record %+v", rec)
		}

		rh.unknown("k2")
		if _, err := rh.keys.Resolve(context.Background(), postkeys.ResolveParams{ID: store.RecordKey{Tenant: "a", Operation: "widgets", Key: "k2"},
			Outcome: postkeys.OutcomeSucceeded, Reference: "wd_x", Actor: "bob", Reason: "checked"}); err != nil {
			t.Fatalf("Adapter.Resolve = %v", err)
		}
		if r := rh.post("/v1/widgets", tokenA, "k2", `{"name":"w"}`); r.Status != http.StatusOK || string(r.Body) != `{"reference":"wd_x"}` {
			t.Fatalf("default answer %d %s", r.Status, r.Body)
		}
	})
}

// TestResolveRacingTheRecoveryWorker: a resolution and a recovery worker
// go for one unknown record; exactly one wins and the other is fenced off.
// First with the worker paused between its read and its takeover (the
// operator wins), then both released at once, many times.
func TestResolveRacingTheRecoveryWorker(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		rh := setupResolve(t, dsn)
		ctx := context.Background()
		rh.unknown("k0")
		reached, resume := rh.worker.pauseNext()
		done := make(chan postkeys.RecoverStats)
		go func() {
			stats, err := rh.keys.RecoverOnce(ctx)
			if err != nil {
				t.Error(err)
			}
			done <- stats
		}()
		<-reached
		if _, err := rh.resolve("k0", succeeded); err != nil {
			t.Fatalf("Resolve while the worker is about to take over = %v", err)
		}
		close(resume)
		if stats := <-done; stats.Skipped != 1 || stats.Completed != 0 || rh.widgets.reconciles.Load() != 0 {
			t.Fatalf("worker after the resolution: %+v, %d reconciles", stats, rh.widgets.reconciles.Load())
		}
		if rec := rh.record("a", "widgets", "k0"); rec.ResourceRef != succeeded.Reference {
			t.Fatalf("record %+v", rec)
		}

		for i := range 8 {
			key := "race-" + string(rune('a'+i))
			rh.unknown(key)
			start := make(chan struct{})
			var (
				wg    sync.WaitGroup
				stats postkeys.RecoverStats
				wErr  error
				rErr  error
			)
			wg.Add(2)
			go func() { defer wg.Done(); <-start; stats, wErr = rh.keys.RecoverOnce(ctx) }()
			go func() { defer wg.Done(); <-start; _, rErr = rh.resolve(key, succeeded) }()
			close(start)
			wg.Wait()
			if wErr != nil {
				t.Fatal(wErr)
			}
			operatorWon, workerWon := rErr == nil, stats.Completed == 1
			if operatorWon == workerWon {
				t.Fatalf("%s: operator %v (%v), worker %+v: want exactly one winner", key, operatorWon, rErr, stats)
			}
			if !operatorWon && !errors.Is(rErr, postkeys.ErrFenced) && !errors.Is(rErr, postkeys.ErrLeaseHeld) && !errors.Is(rErr, postkeys.ErrNotResolvable) {
				t.Fatalf("%s: the losing resolution failed with %v", key, rErr)
			}
			rec := rh.record("a", "widgets", key)
			if rec.State != store.RecordCompleted || (rec.ResourceRef == succeeded.Reference) != operatorWon {
				t.Fatalf("%s: record %+v, operator won %v", key, rec, operatorWon)
			}
			if n := rh.audits(key); (n == 1) != operatorWon || n > 1 {
				t.Fatalf("%s: %d audit rows, operator won %v", key, n, operatorWon)
			}
		}
	})
}
