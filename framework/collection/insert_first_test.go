package collection_test

import (
	"bytes"
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestCreatesInsertFirstAndATakenIDReads: a PUT create of a new ID inserts
// without reading its row (no read of invoices reaches the handle's
// logger), stamped with the estimated database clock, and writes its row,
// its lines and its event once; a retry of it (the replay cache is off)
// finds the ID taken, rolls back, reads and replays byte for byte,
// writing nothing. A run of replaces turns the collection to read-first:
// the creates after it read their row until six of them have brought
// the share of PUTs that found their row back under a half, and the
// creates after those insert first again. With ReadFirst, every create
// reads first.
func TestCreatesInsertFirstAndATakenIDReads(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		// A reading of the database clock holds for the whole test, so
		// that whether a PUT finds an estimate never depends on how fast
		// the machine runs.
		stmts := &statements{}
		h := setup(t, dsn, countStatements(stmts), func(o *setupOptions) {
			o.clockMaxAge = time.Hour
			o.resource = func(r *collection.Resource[InvoiceCommand, Invoice]) { r.ReplayCache = -1 }
		})
		dbNow := func() time.Time {
			t.Helper()
			var now store.DatabaseTime
			if err := h.db.SQL().QueryRowContext(context.Background(), "SELECT "+h.db.Driver.Now()).Scan(&now); err != nil {
				t.Fatal(err)
			}
			return now.Time
		}
		// The first reading, as a read-first would give it.
		h.db.Clock().Observe(dbNow(), time.Now())
		// put sends a PUT and returns its reply and how many reads of the
		// invoices row it made.
		put := func(h *harness, id uuid.UUID, body []byte) (reply, int) {
			t.Helper()
			stmts.reads("invoices")
			r := h.do("PUT", invoicePath(id), "tok1", body)
			return r, stmts.reads("invoices")
		}
		lines := func(id uuid.UUID) int64 {
			return h.count("invoice_lines", "tenant_id = ? AND invoice_id = ?", "t1", id)
		}
		events := func(id uuid.UUID) int64 {
			return h.count("invoice_events", "tenant_id = ? AND invoice_id = ?", "t1", id)
		}

		const n = 8
		ids := make([]uuid.UUID, n)
		created := make([]reply, n)
		for i := range ids {
			ids[i] = uuid.New()
			var reads int
			created[i], reads = put(h, ids[i], invoiceBody("cus_1", 100, i+1))
			wantStatus(t, created[i], http.StatusCreated)
			if reads != 0 {
				t.Fatalf("create %d read its row %d times; it inserts first", i, reads)
			}
			after := dbNow()
			row := h.row(ids[i])
			if v := created[i].view(t); !v.Created.Equal(row.CreatedAt) || !v.Updated.Equal(row.UpdatedAt) || row.CreatedAt.After(after) {
				t.Fatalf("create %d: answered created_at %v, stored %v; the database clock read after it %v", i, v.Created, row.CreatedAt, after)
			}
			if l, e := lines(ids[i]), events(ids[i]); l != 2 || e != 1 {
				t.Fatalf("create %d: %d lines, %d events", i, l, e)
			}
		}

		for i, id := range ids {
			r, reads := put(h, id, invoiceBody("cus_1", 100, i+1))
			if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, created[i].Body) ||
				r.Header.Get("ETag") != created[i].Header.Get("ETag") {
				t.Fatalf("retry %d: %d %v %s, want the create's 201 byte for byte", i, r.Status, r.Header, r.Body)
			}
			if reads != 1 {
				t.Fatalf("retry %d read its row %d times, want once", i, reads)
			}
			if row := h.row(id); row.Version != 1 || lines(id) != 2 || events(id) != 1 {
				t.Fatalf("retry %d wrote: version %d, %d lines, %d events", i, row.Version, lines(id), events(id))
			}
		}
		// Eight PUTs that found their row move the average to 0.40: the
		// collection still inserts first. Replaces: each finds the row.
		// Three more refused INSERTs take the average past a half; the
		// replaces after them read first.
		for i := range 12 {
			r, _ := put(h, ids[0], invoiceBody("cus_1", 200+i))
			wantStatus(t, r, http.StatusOK)
			if v := r.view(t).Version; v != int64(i+2) {
				t.Fatalf("replace %d: version %d", i, v)
			}
		}
		if l := lines(ids[0]); l != 1 {
			t.Fatalf("after the replaces: %d lines", l)
		}

		// Creates under read-first: each read finds no row, and the
		// average falls back under a half after six of them; the creates
		// after those insert first.
		for i := range 12 {
			r, reads := put(h, uuid.New(), invoiceBody("cus_2", i+1))
			wantStatus(t, r, http.StatusCreated)
			if want := min(1, max(0, 6-i)); reads != want {
				t.Fatalf("create %d after the replaces read its row %d times, want %d", i, reads, want)
			}
		}
		if got := h.count("invoices", "tenant_id = ?", "t1"); got != n+12 {
			t.Fatalf("%d invoices, want %d", got, n+12)
		}

		// ReadFirst: every PUT reads its row first.
		rf := setup(t, dsn, countStatements(stmts), func(o *setupOptions) {
			o.clockMaxAge = time.Hour
			o.resource = func(r *collection.Resource[InvoiceCommand, Invoice]) { r.ReadFirst = true }
		})
		rf.db.Clock().Observe(dbNow(), time.Now())
		for i := range 3 {
			r, reads := put(rf, uuid.New(), invoiceBody("cus_3", 1))
			wantStatus(t, r, http.StatusCreated)
			if reads != 1 {
				t.Fatalf("create %d with ReadFirst read its row %d times, want once", i, reads)
			}
		}
	})
}
