package postkeys_test

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// serverErrorBody is what the test operations answer with their 5xx.
const serverErrorBody = `{"error":"the ledger is being rebuilt"}`

// TestLocalServerErrorIsNeverStored: a local operation's Response with a
// 5xx status rolls its transaction back whole (the business write and the
// record), and the client gets the response as it was made, unstored. The
// next retry with the key executes again, and its success is then
// replayed.
func TestLocalServerErrorIsNeverStored(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, nil)
		var calls atomic.Int64
		ep, err := postkeys.Register(h.keys, postkeys.Operation[counterCmd]{
			Name: "flaky",
			ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req postkeys.Request[counterCmd]) (postkeys.Response, error) {
				n := calls.Add(1)
				if err := tx.Exec("INSERT INTO counters (tenant_id, value) VALUES (?, ?)", req.Tenant, req.Command.By).Error; err != nil {
					return postkeys.Response{}, err
				}
				if n == 1 {
					return postkeys.Response{Status: http.StatusInternalServerError, Body: []byte(serverErrorBody)}, nil
				}
				return postkeys.JSON(http.StatusCreated, map[string]any{"by": req.Command.By, "call": n}, "")
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		h.v1.POST("/flaky", ep.Handle)

		failed := h.post("/v1/flaky", tokenA, "k1", `{"by":3}`)
		wantStatus(t, failed, http.StatusInternalServerError)
		if string(failed.Body) != serverErrorBody || failed.Header.Get("Idempotent-Replayed") != "" ||
			failed.Header.Get("Idempotency-Key") != "k1" {
			t.Fatalf("5xx answer: %v %s", failed.Header, failed.Body)
		}
		h.noRecord("a", "flaky", "k1")
		if n := h.count("SELECT count(*) FROM counters"); n != 0 {
			t.Fatalf("the 5xx's business write committed: %d counters", n)
		}

		done := h.post("/v1/flaky", tokenA, "k1", `{"by":3}`)
		wantStatus(t, done, http.StatusCreated)
		if done.Header.Get("Idempotent-Replayed") != "" || calls.Load() != 2 {
			t.Fatalf("the retry after a 5xx was not executed: %d calls, %v", calls.Load(), done.Header)
		}
		wantReplay(t, h.post("/v1/flaky", tokenA, "k1", `{"by":3}`), done)
		if calls.Load() != 2 {
			t.Fatalf("calls = %d, want 2", calls.Load())
		}
		if rec := h.record("a", "flaky", "k1"); rec.ResponseStatus != http.StatusCreated {
			t.Fatalf("record %+v", rec)
		}
		if v := h.count("SELECT value FROM counters WHERE tenant_id = 'a'"); v != 3 {
			t.Fatalf("counter = %d, want 3 (one execution committed)", v)
		}
	})
}

// TestPhasedServerErrorIsNeverStored: a phased operation's Response with
// a 5xx status before its first phase releases the key (the retry runs
// again, and its success is replayed); after a phase committed it leaves
// the record unknown, answered 409 outcome_pending, and the next retry
// reconciles it instead of running the operation again.
func TestPhasedServerErrorIsNeverStored(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, nil)
		var runs, reconciles atomic.Int64
		// widgetCmd.Name says where the first run answers 500: "before"
		// its phase or "after" it.
		ep, err := postkeys.Register(h.keys, postkeys.Operation[widgetCmd]{
			Name: "flaky_phased", Mode: postkeys.Phased,
			RunFunc: func(ctx context.Context, run *postkeys.Run[widgetCmd]) (postkeys.Response, error) {
				first := runs.Add(1) == 1
				cmd, _ := run.Command()
				if first && cmd.Name == "before" {
					return postkeys.Response{Status: http.StatusInternalServerError, Body: []byte(serverErrorBody)}, nil
				}
				id := "wd_" + uuid.NewString()
				if err := run.Phase(ctx, "widget_created", func(tx *gorm.DB) (string, error) {
					return id, tx.Exec("INSERT INTO widgets (tenant_id, id, name) VALUES (?, ?, ?)", run.Tenant(), id, cmd.Name).Error
				}); err != nil {
					return postkeys.Response{}, err
				}
				if first {
					return postkeys.Response{Status: http.StatusBadGateway, Body: []byte(serverErrorBody)}, nil
				}
				return h.widgets.response(ctx, run.Tenant(), id)
			},
			ReconcileFunc: func(ctx context.Context, run *postkeys.Run[widgetCmd]) (postkeys.Response, error) {
				reconciles.Add(1)
				return h.widgets.response(ctx, run.Tenant(), run.ResourceRef())
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		h.v1.POST("/flaky_phased", ep.Handle)

		// Before any side effect: released.
		failed := h.post("/v1/flaky_phased", tokenA, "before", `{"name":"before"}`)
		wantStatus(t, failed, http.StatusInternalServerError)
		if string(failed.Body) != serverErrorBody || failed.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("5xx answer: %v %s", failed.Header, failed.Body)
		}
		h.noRecord("a", "flaky_phased", "before")
		done := h.post("/v1/flaky_phased", tokenA, "before", `{"name":"before"}`)
		wantStatus(t, done, http.StatusCreated)
		if runs.Load() != 2 || done.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the retry after a released 5xx was not executed: %d runs, %v", runs.Load(), done.Header)
		}
		wantReplay(t, h.post("/v1/flaky_phased", tokenA, "before", `{"name":"before"}`), done)

		// After a phase: unknown, reconciled, never run again.
		runs.Store(0)
		pending := h.post("/v1/flaky_phased", tokenA, "after", `{"name":"after"}`)
		wantStatus(t, pending, http.StatusConflict)
		if pending.code(t) != "outcome_pending" || pending.Header.Get("Retry-After") == "" {
			t.Fatalf("5xx after a phase: %v %s", pending.Header, pending.Body)
		}
		if rec := h.record("a", "flaky_phased", "after"); rec.State != store.RecordUnknown || rec.ResponseStatus != 0 {
			t.Fatalf("record after a 5xx past a phase: %+v", rec)
		}
		settled := h.post("/v1/flaky_phased", tokenA, "after", `{"name":"after"}`)
		wantStatus(t, settled, http.StatusCreated)
		if runs.Load() != 1 || reconciles.Load() != 1 {
			t.Fatalf("runs %d, reconciles %d: want the retry to reconcile, not to run again", runs.Load(), reconciles.Load())
		}
		wantReplay(t, h.post("/v1/flaky_phased", tokenA, "after", `{"name":"after"}`), settled)
		if n := h.count("SELECT count(*) FROM widgets WHERE name = 'after'"); n != 1 {
			t.Fatalf("widgets of the unknown attempt = %d, want 1", n)
		}
	})
}

// holdCmd is the command of TestLocalDuplicateNeverExecutes's operation.
type holdCmd struct {
	Name string `json:"name" validate:"required,max=64"`
	// Hold keeps the operation inside its transaction until the test
	// releases it.
	Hold bool `json:"hold,omitempty"`
}

// TestLocalDuplicateNeverExecutes: while a local operation holds its key
// (inside its transaction, on a channel the test holds), a duplicate
// request never runs the operation's code: it waits on the key no longer
// than the store's lock timeout and answers 409 request_in_progress with
// Retry-After (503 unavailable on SQLite, whose one lock names no key),
// while the original is still running. A request with
// another key runs meanwhile (on a server database; SQLite's writers take
// turns on one lock). Once the original commits, the duplicate's retry
// replays it, and the operation ran once per key.
func TestLocalDuplicateNeverExecutes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, nil)
		var calls atomic.Int64
		// entered has room for a second entry, so that a duplicate that
		// runs the operation is seen instead of blocking.
		entered, release := make(chan string, 2), make(chan struct{})
		ep, err := postkeys.Register(h.keys, postkeys.Operation[holdCmd]{
			Name: "held",
			ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req postkeys.Request[holdCmd]) (postkeys.Response, error) {
				calls.Add(1)
				id := "wd_" + uuid.NewString()
				if err := tx.Exec("INSERT INTO widgets (tenant_id, id, name) VALUES (?, ?, ?)", req.Tenant, id, req.Command.Name).Error; err != nil {
					return postkeys.Response{}, err
				}
				if req.Command.Hold {
					entered <- req.Key
					<-release
				}
				return postkeys.JSON(http.StatusCreated, widget{ID: id, Name: req.Command.Name}, id)
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		h.v1.POST("/held", ep.Handle)
		released := false
		defer func() {
			if !released {
				close(release)
			}
		}()

		body := `{"name":"held","hold":true}`
		firstc := make(chan response, 1)
		go func() { firstc <- h.post("/v1/held", tokenA, "k1", body) }()
		<-entered

		dupc := make(chan response, 1)
		go func() { dupc <- h.post("/v1/held", tokenA, "k1", body) }()
		select {
		case dup := <-dupc:
			// SQLite's one write lock cannot say whose key a writer waits
			// for: a wait past the lock timeout there is 503 unavailable,
			// retried with the same key as a 409 is.
			status, code := http.StatusConflict, "request_in_progress"
			if h.db.Driver.Name() == "sqlite" {
				status, code = http.StatusServiceUnavailable, "unavailable"
			}
			wantStatus(t, dup, status)
			if dup.code(t) != code || dup.Header.Get("Retry-After") == "" || dup.Header.Get("Idempotency-Key") != "k1" {
				t.Fatalf("duplicate: %v %s", dup.Header, dup.Body)
			}
		case key := <-entered:
			t.Fatalf("a request with key %s ran the operation while the key was held", key)
		case <-time.After(time.Minute):
			t.Fatal("the duplicate waited for the original instead of answering")
		}
		if calls.Load() != 1 {
			t.Fatalf("calls = %d while the key is held, want 1", calls.Load())
		}

		if h.db.Driver.Name() != "sqlite" {
			other := h.post("/v1/held", tokenA, "k2", `{"name":"other"}`)
			wantStatus(t, other, http.StatusCreated)
			if calls.Load() != 2 {
				t.Fatalf("calls = %d after another key, want 2", calls.Load())
			}
		}

		released = true
		close(release)
		first := <-firstc
		wantStatus(t, first, http.StatusCreated)
		wantReplay(t, h.post("/v1/held", tokenA, "k1", body), first)
		if n := h.count("SELECT count(*) FROM widgets WHERE name = 'held'"); n != 1 {
			t.Fatalf("widgets of k1 = %d, want 1", n)
		}
		if rec := h.record("a", "held", "k1"); rec.State != store.RecordCompleted || rec.Attempt != 1 {
			t.Fatalf("record %+v", rec)
		}
	})
}
