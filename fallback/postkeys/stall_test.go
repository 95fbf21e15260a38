package postkeys_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// gate stalls the n-th call of a hook until it is opened.
type gate struct {
	calls   atomic.Int64
	n       int64
	entered chan struct{}
	open    chan struct{}
}

func newGate(n int64) *gate {
	return &gate{n: n, entered: make(chan struct{}), open: make(chan struct{})}
}

func (g *gate) hook(int64) error {
	if g.calls.Add(1) == g.n {
		close(g.entered)
		<-g.open
	}
	return nil
}

// TestStalledAttemptWokenAfterReleaseAndReclaim is the double charge of
// a stall: attempt A stalls between its claim and its first phase past
// its lease; the recovery worker takes the record over and releases it
// (nothing had happened); a retry claims the key again and is itself on
// its way to the provider when A wakes up. A's fence is no longer the
// record's: it writes no row, calls no provider, completes nothing.
func TestStalledAttemptWokenAfterReleaseAndReclaim(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		before, after := newGate(1), newGate(1)
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.InProgressWait = -1
			w.beforePhase = before.hook // the first run stalls before its phase
			w.afterPhase = after.hook   // the first run past its phase: the retry's
		})
		zombie := make(chan response, 1)
		go func() { zombie <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-before.entered
		stale := h.record("a", "widgets", "k1")

		h.clock.Advance(lease + time.Second)
		stats, err := h.keys.RecoverOnce(context.Background())
		if err != nil || stats.Released != 1 {
			t.Fatalf("recover: %+v %v", stats, err)
		}
		h.noRecord("a", "widgets", "k1")

		retry := make(chan response, 1)
		go func() { retry <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-after.entered
		current := h.record("a", "widgets", "k1")
		if current.Attempt != 1 || current.Fence == stale.Fence || current.RecoveryPoint != "widget_created" {
			t.Fatalf("re-claimed record %+v, stale fence %d", current, stale.Fence)
		}

		close(before.open)
		z := <-zombie
		wantStatus(t, z, http.StatusConflict)
		if z.code(t) != "request_in_progress" {
			t.Fatalf("woken attempt answered %s", z.Body)
		}
		if n := h.widgetsCount(); n != 1 || h.widgets.provider.Load() != 0 {
			t.Fatalf("after the wake-up: widgets %d, provider calls %d; want 1 (the retry's) and 0", n, h.widgets.provider.Load())
		}
		if rec := h.record("a", "widgets", "k1"); rec.Fence != current.Fence || !rec.UpdatedAt.Equal(current.UpdatedAt) {
			t.Fatalf("the woken attempt wrote the record: %+v", rec)
		}

		close(after.open)
		r := <-retry
		wantStatus(t, r, http.StatusCreated)
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 1 {
			t.Fatalf("widgets %d, provider calls %d, want 1 and 1", h.widgetsCount(), h.widgets.provider.Load())
		}
		wantReplay(t, h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`), r)
	})
}

// TestStalledAttemptWokenAfterItsOwnLease: nobody took the record over,
// but the attempt's lease ended on the database clock while it stalled
// before its phase. It writes nothing; a later retry takes over and runs
// the operation once.
func TestStalledAttemptWokenAfterItsOwnLease(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		before := newGate(1)
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.InProgressWait = -1
			w.beforePhase = before.hook
		})
		zombie := make(chan response, 1)
		go func() { zombie <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-before.entered
		claimed := h.record("a", "widgets", "k1")
		h.clock.Advance(lease + time.Second)
		close(before.open)
		z := <-zombie
		wantStatus(t, z, http.StatusConflict)
		if h.widgetsCount() != 0 || h.widgets.provider.Load() != 0 {
			t.Fatalf("widgets %d, provider calls %d, want none", h.widgetsCount(), h.widgets.provider.Load())
		}
		rec := h.record("a", "widgets", "k1")
		if rec.State != store.RecordInProgress || rec.RecoveryPoint != postkeys.PointStarted || !rec.UpdatedAt.Equal(claimed.UpdatedAt) {
			t.Fatalf("the expired attempt wrote its record: %+v", rec)
		}
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 1 || h.record("a", "widgets", "k1").Attempt != 2 {
			t.Fatalf("after the takeover: widgets %d, provider calls %d", h.widgetsCount(), h.widgets.provider.Load())
		}
	})
}

// TestStalledAttemptRenewsBeforeTheProvider: an attempt that stalled after
// its phase, past its lease, fails to renew it and so never calls the
// provider; the retry that takes over resumes from the recovery point and
// calls it once.
func TestStalledAttemptRenewsBeforeTheProvider(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		after := newGate(1)
		h := setup(t, dsn, func(cfg *postkeys.Config, w *widgets) {
			cfg.InProgressWait = -1
			w.afterPhase = after.hook
		})
		zombie := make(chan response, 1)
		go func() { zombie <- h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`) }()
		<-after.entered
		h.clock.Advance(lease + time.Second)
		close(after.open)
		wantStatus(t, <-zombie, http.StatusConflict)
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 0 {
			t.Fatalf("widgets %d, provider calls %d; want the phase's row and no call", h.widgetsCount(), h.widgets.provider.Load())
		}
		if rec := h.record("a", "widgets", "k1"); rec.State != store.RecordInProgress || rec.RecoveryPoint != "widget_created" {
			t.Fatalf("record %+v", rec)
		}
		r := h.post("/v1/widgets", tokenA, "k1", `{"name":"w1"}`)
		wantStatus(t, r, http.StatusCreated)
		if h.widgetsCount() != 1 || h.widgets.provider.Load() != 1 {
			t.Fatalf("after the takeover: widgets %d, provider calls %d, want 1 and 1", h.widgetsCount(), h.widgets.provider.Load())
		}
	})
}
