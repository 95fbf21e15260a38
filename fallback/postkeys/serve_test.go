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
	"github.com/retrysafe/retrysafe/internal/testdb"
)

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
// Retry-After, while the original is still running. A request with
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
			wantStatus(t, dup, http.StatusConflict)
			if dup.code(t) != "request_in_progress" || dup.Header.Get("Retry-After") == "" || dup.Header.Get("Idempotency-Key") != "k1" {
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
		if rec := h.record("a", "held", "k1"); rec.State != postkeys.StateCompleted || rec.Attempt != 1 {
			t.Fatalf("record %+v", rec)
		}
	})
}
