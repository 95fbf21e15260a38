package collection_test

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/go-playground/validator/v10"
	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestReplayCacheAnswersAsTheBind walks one resource through replays,
// replaces, a stale If-Match, another tenant, a delete and the legacy
// POST, with the replay cache on and off. Both answer every step alike
// (status, replay header, problem code, version; the cached replays byte
// for byte as the bound one), and with it on, a retry of bytes already
// replayed is answered from the cache without a bind, while one whose row
// asks for a write binds again and writes once. The binds are counted by
// a validation of the command registered on the engine's binder.
func TestReplayCacheAnswersAsTheBind(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		var transcripts [2][]string
		for i, size := range []int{0, -1} {
			on := size == 0
			h := setup(t, dsn, func(o *setupOptions) {
				o.resource = func(r *collection.Resource[InvoiceCommand, Invoice]) { r.ReplayCache = size }
			})
			var binds atomic.Int64
			h.engine.Binder().Validator().RegisterStructValidation(func(validator.StructLevel) { binds.Add(1) }, InvoiceCommand{})
			// wantBinds checks the binds since the last step: with the
			// cache on, and off.
			wantBinds := func(step string, withCache, without int64) {
				t.Helper()
				want := without
				if on {
					want = withCache
				}
				if n := binds.Swap(0); n != want {
					t.Fatalf("cache on=%v, %s: %d binds, want %d", on, step, n, want)
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
			wantBinds("the create", 1, 1)
			bound := put(a)
			// Bound, then bound again for the cache.
			wantBinds("the first replay", 2, 1)
			cached := put(a)
			wantBinds("the second replay", 0, 1)
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
			wantBinds("the concurrent replays", 0, 40)
			if row := h.row(id); row.Version != 1 || len(row.Lines) != 2 || lines() != 2 || events() != 1 {
				t.Fatalf("after the replays: version %d, %d lines, %d events; want 1, 2, 1", row.Version, lines(), events())
			}

			// Another tenant's PUT of the same bytes and ID is its own create.
			other := record(h.do("PUT", invoicePath(id), "tok2", a))
			wantStatus(t, other, http.StatusCreated)
			if other.Header.Get("Idempotent-Replayed") != "" {
				t.Fatalf("tenant t2's create replayed t1's")
			}
			wantBinds("t2's create", 1, 1)

			// A replace, then the first bytes again: the kept command's row
			// asks for a write, which binds again and replaces once.
			wantStatus(t, put(b), http.StatusOK)
			back := put(a)
			wantStatus(t, back, http.StatusOK)
			// b binds; a is found kept, its row asks for a write: bound again.
			wantBinds("the replace and the replace back", 2, 2)
			if row := h.row(id); row.Version != 3 || row.Customer != "cus_1" || len(row.Lines) != 2 || lines() != 2 {
				t.Fatalf("after the replace back: version %d, customer %s, %d lines; want 3, cus_1, 2", row.Version, row.Customer, lines())
			}
			// The body is the creating one again: its retry within the
			// window is the create's replay, 201, with the current row.
			again := put(a)
			if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, back.Body) {
				t.Fatalf("replay after the replace back: %d %s, want 201 %s", again.Status, again.Body, back.Body)
			}
			wantBinds("the replace's replay", 0, 1)

			// A stale If-Match whose write would change nothing converges.
			converged := put(a, "If-Match", created.Header.Get("ETag"))
			wantStatus(t, converged, http.StatusOK)
			wantBinds("the convergence", 0, 1)
			// A status change is a new version of the row: the replay
			// renders it, not the representation kept for version 3.
			if _, err := h.col.SetStatus(context.Background(), "t1", id, "sent"); err != nil {
				t.Fatal(err)
			}
			sent := put(a)
			if v := sent.view(t); sent.Status != http.StatusCreated || v.Status != "sent" || v.Version != 4 || bytes.Equal(sent.Body, again.Body) {
				t.Fatalf("replay after a status change: %d %s", sent.Status, sent.Body)
			}
			wantBinds("the status change's replay", 0, 1)
			// If-None-Match: * on a row created with these bytes and since
			// replaced: refused from the cache as from the bind.
			wantStatus(t, put(b, "If-None-Match", "*"), http.StatusPreconditionFailed)
			wantBinds("the refused If-None-Match", 1, 1)

			// Deleted: the kept command meets a tombstone, 410.
			wantStatus(t, record(h.do("DELETE", invoicePath(id), "tok1", nil)), http.StatusNoContent)
			if gone := put(a); gone.Status != http.StatusGone {
				t.Fatalf("PUT after DELETE: %d %s, want 410", gone.Status, gone.Body)
			}
			wantBinds("the PUT after the tombstone", 0, 1)
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
			// The first bound once, its first replay twice, the second none.
			wantBinds("the legacy create and replays", 3, 3)
			if r := post(key, b); r.Status != http.StatusUnprocessableEntity || r.code(t) != "idempotency_key_reuse" {
				t.Fatalf("legacy key reused with another body: %d %s", r.Status, r.Body)
			}
			wantBinds("the legacy key reused", 1, 1)
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
