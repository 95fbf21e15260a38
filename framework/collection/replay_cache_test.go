package collection_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestReplayCacheAnswersAsTheBind walks one resource through replays,
// replaces, a stale If-Match, another tenant, a delete and the legacy
// POST, with the replay cache on and off. Both answer every step alike
// (status, replay header, problem code, version; the cached replays byte
// for byte as the bound one), and with it on, a retry of bytes already
// replayed is answered from the cache, while one whose row asks for a
// write binds again and writes once.
func TestReplayCacheAnswersAsTheBind(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		var transcripts [2][]string
		for i, size := range []int{0, -1} {
			on := size == 0
			h := setup(t, dsn, func(o *setupOptions) {
				o.resource = func(r *collection.Resource[InvoiceCommand, Invoice]) { r.ReplayCache = size }
			})
			stats := func() (int, int64, int64) { return collection.ReplayCacheStats(h.col) }
			wantStats := func(step string, entries int, hits, fallbacks int64) {
				t.Helper()
				if !on {
					entries, hits, fallbacks = 0, 0, 0
				}
				if e, hi, f := stats(); e != entries || hi != hits || f != fallbacks {
					t.Fatalf("cache on=%v, %s: %d entries, %d hits, %d fallbacks; want %d, %d, %d", on, step, e, hi, f, entries, hits, fallbacks)
				}
			}
			record := func(r reply) reply {
				t.Helper()
				line := fmt.Sprintf("%d replayed=%q", r.Status, r.Header.Get("Idempotent-Replayed"))
				if r.Status >= 400 {
					line += " " + r.code(t)
				} else if r.Status != http.StatusNoContent {
					line += fmt.Sprintf(" version=%d", r.view(t).Version)
				}
				transcripts[i] = append(transcripts[i], line)
				return r
			}
			id := uuid.New()
			a, b := invoiceBody("cus_1", 100, 250), invoiceBody("cus_2", 5)
			put := func(body []byte, headers ...string) reply {
				t.Helper()
				return record(h.do("PUT", invoicePath(id), "tok1", body, headers...))
			}
			lines := func() int64 { return h.count("invoice_lines", "tenant_id = ? AND invoice_id = ?", "t1", id) }
			events := func() int64 { return h.count("invoice_events", "tenant_id = ? AND invoice_id = ?", "t1", id) }

			created := put(a)
			wantStatus(t, created, http.StatusCreated)
			wantStats("after the create", 0, 0, 0)
			bound := put(a)
			wantStats("after the first replay", 1, 0, 0)
			cached := put(a)
			wantStats("after the second replay", 1, 1, 0)
			for _, r := range []reply{bound, cached} {
				if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, created.Body) ||
					r.Header.Get("ETag") != created.Header.Get("ETag") || r.Header.Get("Location") != created.Header.Get("Location") {
					t.Fatalf("cache on=%v: replay %d %v %s, want the create's 201 byte for byte", on, r.Status, r.Header, r.Body)
				}
			}

			// Concurrent retries share the kept command (run with -race).
			var wg sync.WaitGroup
			bodies := make(chan []byte, 40)
			for range 8 {
				wg.Go(func() {
					for range 5 {
						r := h.do("PUT", invoicePath(id), "tok1", a)
						if r.Status != http.StatusCreated {
							t.Errorf("concurrent replay: %d %s", r.Status, r.Body)
						}
						bodies <- r.Body
					}
				})
			}
			wg.Wait()
			close(bodies)
			for body := range bodies {
				if !bytes.Equal(body, created.Body) {
					t.Fatalf("concurrent replay %s, want %s", body, created.Body)
				}
			}
			wantStats("after the concurrent replays", 1, 41, 0)
			if row := h.row(id); row.Version != 1 || len(row.Lines) != 2 || lines() != 2 || events() != 1 {
				t.Fatalf("after the replays: version %d, %d lines, %d events; want 1, 2, 1", row.Version, lines(), events())
			}

			// Another tenant's PUT of the same bytes and ID is its own create.
			other := record(h.do("PUT", invoicePath(id), "tok2", a))
			wantStatus(t, other, http.StatusCreated)
			if other.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("tenant t2's create replayed t1's")
			}
			wantStats("after t2's create", 1, 41, 0)

			// A replace, then the first bytes again: the kept command's row
			// asks for a write, which binds again and replaces once.
			wantStatus(t, put(b), http.StatusOK)
			back := put(a)
			wantStatus(t, back, http.StatusOK)
			wantStats("after the replace back", 1, 41, 1)
			if row := h.row(id); row.Version != 3 || row.Customer != "cus_1" || len(row.Lines) != 2 || lines() != 2 {
				t.Fatalf("after the replace back: version %d, customer %s, %d lines; want 3, cus_1, 2", row.Version, row.Customer, lines())
			}
			// The body is the creating one again: its retry within the
			// window is the create's replay, 201, with the current row.
			again := put(a)
			if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, back.Body) {
				t.Fatalf("replay after the replace back: %d %s, want 201 %s", again.Status, again.Body, back.Body)
			}
			wantStats("after the replace's replay", 1, 42, 1)

			// A stale If-Match whose write would change nothing converges.
			converged := put(a, "If-Match", created.Header.Get("ETag"))
			wantStatus(t, converged, http.StatusOK)
			wantStats("after the convergence", 1, 43, 1)
			// A status change is a new version of the row: the replay
			// renders it, not the representation kept for version 3.
			if _, err := h.col.SetStatus(context.Background(), "t1", id, "sent"); err != nil {
				t.Fatal(err)
			}
			sent := put(a)
			if v := sent.view(t); sent.Status != http.StatusCreated || v.Status != "sent" || v.Version != 4 || bytes.Equal(sent.Body, again.Body) {
				t.Fatalf("replay after a status change: %d %s", sent.Status, sent.Body)
			}
			wantStats("after the status change", 1, 44, 1)
			// If-None-Match: * on a row created with these bytes and since
			// replaced: refused from the cache as from the bind.
			wantStatus(t, put(b, "If-None-Match", "*"), http.StatusPreconditionFailed)

			// Deleted: the kept command meets a tombstone, 410.
			wantStatus(t, record(h.do("DELETE", invoicePath(id), "tok1", nil)), http.StatusNoContent)
			if gone := put(a); gone.Status != http.StatusGone {
				t.Fatalf("PUT after DELETE: %d %s, want 410", gone.Status, gone.Body)
			}
			wantStats("after the tombstone", 1, 45, 1)
			if n := h.count("invoices", "tenant_id = ? AND id = ? AND deleted_at IS NOT NULL", "t1", id); n != 1 {
				t.Fatalf("%d tombstones, want 1", n)
			}

			// The legacy POST shares the cache, per key.
			legacy := h.legacy()
			post := func(key string, body []byte) reply {
				t.Helper()
				return record(legacy.do("POST", "/v1/invoices", "tok1", body, "Idempotency-Key", key))
			}
			key := "legacy-" + uuid.NewString()
			first := post(key, a)
			wantStatus(t, first, http.StatusCreated)
			for range 2 {
				if r := post(key, a); r.Status != http.StatusCreated || !bytes.Equal(r.Body, first.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
					t.Fatalf("legacy replay %d %s, want 201 %s", r.Status, r.Body, first.Body)
				}
			}
			wantStats("after the legacy replays", 2, 46, 1)
			if r := post(key, b); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reuse" {
				t.Fatalf("legacy key reused with another body: %d %s", r.Status, r.Body)
			}
			legacyID := collection.LegacyID("invoices", key)
			if n := h.count("invoice_lines", "tenant_id = ? AND invoice_id = ?", "t1", legacyID); n != 2 {
				t.Fatalf("the legacy order has %d lines, want 2", n)
			}
		}
		if fmt.Sprint(transcripts[0]) != fmt.Sprint(transcripts[1]) {
			t.Fatalf("the cache changed an answer:\non:  %q\noff: %q", transcripts[0], transcripts[1])
		}
	})
}
