package collection_test

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestPutJudgesOnTheDatabaseClock: three processes on one database, one
// whose clock is right, one 25 h ahead (past the replay window) and one
// 745 h ahead (past the 30-day tombstone retention). The replay window and
// the tombstone are judged on the database clock, and the rows' times come
// from it, so the processes agree.
func TestPutJudgesOnTheDatabaseClock(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		ahead25 := setup(t, dsn, func(o *setupOptions) { o.clockAhead = 25 * time.Hour })
		ahead745 := setup(t, dsn, func(o *setupOptions) { o.clockAhead = 745 * time.Hour })
		events := func(id uuid.UUID) int64 {
			return h.count("invoice_events", "tenant_id = ? AND invoice_id = ?", "t1", id)
		}

		// A retry of a create another process made a moment ago replays it:
		// 201 + Idempotent-Replayed, byte for byte, nothing written.
		id := uuid.New()
		created := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 100, 250))
		wantStatus(t, created, http.StatusCreated)
		before := h.row(id)
		for _, peer := range []*harness{ahead25, ahead745} {
			retry := peer.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 100, 250))
			wantStatus(t, retry, http.StatusCreated)
			if retry.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(retry.Body, created.Body) ||
				retry.Header.Get("ETag") != created.Header.Get("ETag") {
				t.Fatalf("retry on a clock ahead: %v %s, want the replay of %s", retry.Header, retry.Body, created.Body)
			}
		}
		if r := h.row(id); r.Version != 1 || !r.UpdatedAt.Equal(before.UpdatedAt) || len(r.Lines) != 2 || events(id) != 1 {
			t.Fatalf("the replays wrote: %+v, events %d", r, events(id))
		}

		// A PUT to an ID another process deleted a moment ago is 410, and
		// the deleted resource is not created again.
		gone := uuid.New()
		wantStatus(t, h.do("PUT", invoicePath(gone), "tok1", invoiceBody("cus_1", 1)), http.StatusCreated)
		wantStatus(t, h.do("DELETE", invoicePath(gone), "tok1", nil), http.StatusNoContent)
		again := ahead745.do("PUT", invoicePath(gone), "tok1", invoiceBody("cus_1", 1))
		wantStatus(t, again, http.StatusGone)
		if again.code(t) != "resource_deleted" {
			t.Fatalf("PUT to a fresh tombstone on a clock ahead: %s", again.Body)
		}
		if r := h.row(gone); r.DeletedAt == nil || events(gone) != 1 || h.count("invoices", "id = ?", gone) != 1 {
			t.Fatalf("the tombstone was revived: %+v, events %d", r, events(gone))
		}

		// A process ahead stamps its writes with the database clock too: a
		// create and a delete there leave times a process with the right
		// clock judges as just now.
		late := uuid.New()
		start := time.Now()
		wantStatus(t, ahead745.do("PUT", invoicePath(late), "tok1", invoiceBody("cus_2", 5)), http.StatusCreated)
		if r := h.row(late); r.CreatedAt.After(time.Now().Add(time.Minute)) || r.CreatedAt.Before(start.Add(-time.Minute)) {
			t.Fatalf("created_at %v written by a clock 745 h ahead, want about %v", r.CreatedAt, start)
		}
		wantStatus(t, ahead745.do("DELETE", invoicePath(late), "tok1", nil), http.StatusNoContent)
		if r := h.row(late); r.DeletedAt == nil || r.DeletedAt.After(time.Now().Add(time.Minute)) {
			t.Fatalf("deleted_at %v written by a clock 745 h ahead", r.DeletedAt)
		}
		wantStatus(t, h.do("PUT", invoicePath(late), "tok1", invoiceBody("cus_2", 5)), http.StatusGone)
	})
}
