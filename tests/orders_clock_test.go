package tests

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestOrdersAcrossSkewedProcesses: three demo processes on one database,
// one with the right clock, one 25 h ahead (past the replay window), one
// 745 h ahead (past the 30-day tombstone retention). PUT judges on the
// database clock, so a retry served by a process ahead replays the create
// another process made a second earlier, and a PUT to an order another
// process deleted a second earlier is 410 with no second order.created.
func TestOrdersAcrossSkewedProcesses(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ahead := func(d time.Duration) func(*app.Config) {
			return func(c *app.Config) { c.Now = func() time.Time { return time.Now().Add(d) } }
		}
		e := newEnv(t, dsn, ahead(0))
		ahead25, ahead745 := newEnv(t, dsn, ahead(25*time.Hour)), newEnv(t, dsn, ahead(745*time.Hour))

		id := uuid.New()
		created := e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, created, http.StatusCreated)
		before := e.order("acme", id)
		for _, peer := range []*env{ahead25, ahead745} {
			retry := peer.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"))
			wantStatus(t, retry, http.StatusCreated)
			if retry.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(retry.Body, created.Body) {
				t.Fatalf("retry on a clock ahead: %v %s, want the replay of %s", retry.Header, retry.Body, created.Body)
			}
		}
		if after := e.order("acme", id); after != before || e.events("acme", id) != 1 {
			t.Fatalf("the replays wrote: %+v → %+v, %d order.created events", before, after, e.events("acme", id))
		}

		deleted := uuid.New()
		wantStatus(t, e.do("PUT", orderPath(deleted), tokenAcme, orderBody(2, "10.00")), http.StatusCreated)
		wantStatus(t, e.do("DELETE", orderPath(deleted), tokenAcme, nil), http.StatusNoContent)
		gone := ahead745.do("PUT", orderPath(deleted), tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, gone, http.StatusGone)
		if gone.Code(t) != "resource_deleted" {
			t.Fatalf("PUT to a fresh tombstone on a clock ahead: %s", gone.Body)
		}
		if row := e.order("acme", deleted); row.DeletedAt == nil || e.events("acme", deleted) != 1 || e.count("orders", "id = ?", deleted.String()) != 1 {
			t.Fatalf("the deleted order came back: %+v, %d order.created events", row, e.events("acme", deleted))
		}
	})
}
