package collection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestPutContract walks the rows of DESIGN §5.1 on the invoices resource
// over HTTP and checks what each wrote: the row, its child rows and the
// creation hook's rows.
func TestPutContract(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		id := uuid.New()
		lines := func() int64 { return h.count("invoice_lines", "tenant_id = ? AND invoice_id = ?", "t1", id) }
		events := func() int64 { return h.count("invoice_events", "tenant_id = ? AND invoice_id = ?", "t1", id) }

		// New ID: 201, Location, ETag, representation; one row, its lines,
		// one creation-hook row carrying the reply's representation.
		created := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 100, 250))
		wantStatus(t, created, http.StatusCreated)
		if created.Header.Get("Location") != invoicePath(id) || created.Header.Get("ETag") == "" || created.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("create headers: %v", created.Header)
		}
		if v := created.view(t); v.ID != id.String() || v.Version != 1 || v.Status != "draft" || v.Total != 350 || len(v.Lines) != 2 {
			t.Fatalf("representation %s", created.Body)
		}
		row := h.row(id)
		if row.Customer != "cus_1" || row.TotalAmount != 350 || len(row.Lines) != 2 || row.Lines[1].Amount != 250 || row.Lines[1].Text != "line 2" {
			t.Fatalf("typed columns: %+v", row)
		}
		var payload string
		if err := h.db.Gorm.Table("invoice_events").Select("payload").Where("invoice_id = ?", id).Scan(&payload).Error; err != nil || payload != string(created.Body) {
			t.Fatalf("hook payload %q (%v), want the reply's representation", payload, err)
		}

		// Same body (another spelling) within the window: 201 replayed, byte
		// for byte, nothing written.
		again := h.do("PUT", invoicePath(id), "tok1", []byte(`{"lines":[{"amount":1e2,"text":"line 1"},{"text":"line 2","amount":250.0}],"customer":"cus_1"}`))
		wantStatus(t, again, http.StatusCreated)
		if again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, created.Body) ||
			again.Header.Get("ETag") != created.Header.Get("ETag") || again.Header.Get("Location") != invoicePath(id) {
			t.Fatalf("replay: %v %s", again.Header, again.Body)
		}
		if r := h.row(id); r.Version != 1 || !r.UpdatedAt.Equal(row.UpdatedAt) || lines() != 2 || events() != 1 {
			t.Fatalf("replay wrote: %+v lines %d events %d", r, lines(), events())
		}

		// After the window (on the database clock: the row was written 25 h
		// ago): 200, current representation, nothing written.
		testdb.Age(t, h.db.Gorm, "invoices", 25*time.Hour, "tenant_id = ? AND id = ?", "t1", id)
		current := h.do("GET", invoicePath(id), "tok1", nil)
		wantStatus(t, current, http.StatusOK)
		late := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 100, 250))
		wantStatus(t, late, http.StatusOK)
		if late.Header.Get("Idempotent-Replayed") != "" || !bytes.Equal(late.Body, current.Body) {
			t.Fatalf("converged: %v %s", late.Header, late.Body)
		}
		if r := h.row(id); r.Version != 1 || events() != 1 {
			t.Fatalf("convergence wrote: %+v", r)
		}

		// A different body replaces the draft: 200, version 2, new ETag,
		// child rows replaced, no second creation-hook row.
		replaced := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_2", 7))
		wantStatus(t, replaced, http.StatusOK)
		etag2 := replaced.Header.Get("ETag")
		if v := replaced.view(t); v.Version != 2 || v.Total != 7 || v.Customer != "cus_2" || etag2 == created.Header.Get("ETag") {
			t.Fatalf("replace: %v %s", replaced.Header, replaced.Body)
		}
		if r := h.row(id); r.Version != 2 || r.Customer != "cus_2" || len(r.Lines) != 1 || r.Lines[0].Amount != 7 || lines() != 1 || events() != 1 {
			t.Fatalf("replace stored %+v, lines %d, events %d", r, lines(), events())
		}
		// The replacing body again within the window: 200 replayed.
		afterReplace := h.row(id)
		rerun := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_2", 7))
		wantStatus(t, rerun, http.StatusOK)
		if rerun.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(rerun.Body, replaced.Body) {
			t.Fatalf("replayed replace: %v %s", rerun.Header, rerun.Body)
		}
		// A replace that changes nothing writes nothing: the version, the
		// timestamps and the child rows stay.
		if r := h.row(id); r.Version != 2 || !r.UpdatedAt.Equal(afterReplace.UpdatedAt) || len(r.Lines) != 1 || r.Lines[0] != afterReplace.Lines[0] {
			t.Fatalf("the unchanged replace wrote: %+v, was %+v", r, afterReplace)
		}

		// A stale If-Match: 412, nothing written; the current one replaces.
		stale := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_3", 1), "If-Match", created.Header.Get("ETag"))
		wantStatus(t, stale, http.StatusPreconditionFailed)
		if stale.code(t) != "precondition_failed" || h.row(id).Version != 2 {
			t.Fatalf("stale If-Match: %s", stale.Body)
		}
		fresh := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_3", 1, 2, 3), "If-Match", etag2)
		wantStatus(t, fresh, http.StatusOK)
		if r := h.row(id); r.Version != 3 || len(r.Lines) != 3 {
			t.Fatalf("If-Match replace stored %+v", r)
		}

		// If-None-Match: * with the creating body replays the current
		// representation (201), with another body 412; neither writes.
		current = h.do("GET", invoicePath(id), "tok1", nil)
		wantStatus(t, current, http.StatusOK)
		retried := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 100, 250), "If-None-Match", "*")
		wantStatus(t, retried, http.StatusCreated)
		if retried.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(retried.Body, current.Body) {
			t.Fatalf("retried create: %v %s, want %s", retried.Header, retried.Body, current.Body)
		}
		other := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_9", 9), "If-None-Match", "*")
		wantStatus(t, other, http.StatusPreconditionFailed)
		if r := h.row(id); r.Version != 3 || lines() != 3 || events() != 1 {
			t.Fatalf("If-None-Match requests wrote: %+v", r)
		}

		// If-Match on an ID that does not exist creates nothing.
		missing := uuid.New()
		wantStatus(t, h.do("PUT", invoicePath(missing), "tok1", invoiceBody("c", 1), "If-Match", etag2), http.StatusPreconditionFailed)
		if n := h.count("invoices", "id = ?", missing); n != 0 {
			t.Fatalf("If-Match on a missing ID stored %d rows", n)
		}

		// Another tenant: the same UUID is another resource; GET is 404.
		wantStatus(t, h.do("GET", invoicePath(id), "tok2", nil), http.StatusNotFound)
		wantStatus(t, h.do("PUT", invoicePath(id), "tok2", invoiceBody("cus_1", 100, 250)), http.StatusCreated)
		if n := h.count("invoices", "id = ?", id); n != 2 {
			t.Fatalf("rows with the ID in two tenants = %d", n)
		}

		// Once not a draft, a replace is refused by the guard.
		if _, err := h.col.SetStatus(context.Background(), "t1", id, "sent"); err != nil {
			t.Fatal(err)
		}
		locked := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_4", 4))
		wantStatus(t, locked, http.StatusConflict)
		if locked.code(t) != "resource_locked" || h.row(id).Customer != "cus_3" {
			t.Fatalf("locked: %s", locked.Body)
		}
	})
}

// TestConditionalRequests: GET with a matching If-None-Match is 304, HEAD
// answers GET's headers without a body, DELETE honours If-Match.
func TestConditionalRequests(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		id := uuid.New()
		created := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 5))
		wantStatus(t, created, http.StatusCreated)
		etag := created.Header.Get("ETag")

		got := h.do("GET", invoicePath(id), "tok1", nil)
		wantStatus(t, got, http.StatusOK)
		if got.Header.Get("ETag") != etag || !bytes.Equal(got.Body, created.Body) {
			t.Fatalf("GET: %v %s", got.Header, got.Body)
		}
		for _, inm := range []string{etag, "W/" + etag, `"x", ` + etag, "*"} {
			nm := h.do("GET", invoicePath(id), "tok1", nil, "If-None-Match", inm)
			wantStatus(t, nm, http.StatusNotModified)
			if len(nm.Body) != 0 || nm.Header.Get("ETag") != etag {
				t.Fatalf("304 for %q: %v %q", inm, nm.Header, nm.Body)
			}
		}
		wantStatus(t, h.do("GET", invoicePath(id), "tok1", nil, "If-None-Match", `"0-00000000"`), http.StatusOK)
		wantStatus(t, h.do("GET", invoicePath(id), "tok2", nil, "If-None-Match", "*"), http.StatusNotFound)

		head := h.do("HEAD", invoicePath(id), "tok1", nil)
		wantStatus(t, head, http.StatusOK)
		if len(head.Body) != 0 || head.Header.Get("ETag") != etag || head.Header.Get("Content-Length") != "" && head.Header.Get("Content-Length") != itoa(len(got.Body)) {
			t.Fatalf("HEAD: %v %q", head.Header, head.Body)
		}
		wantStatus(t, h.do("HEAD", invoicePath(id), "tok2", nil), http.StatusNotFound)
		wantStatus(t, h.do("HEAD", "/v1/invoices", "tok1", nil), http.StatusOK)

		// DELETE with a stale If-Match: 412 and the resource stays.
		replaced := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 6))
		wantStatus(t, replaced, http.StatusOK)
		stale := h.do("DELETE", invoicePath(id), "tok1", nil, "If-Match", etag)
		wantStatus(t, stale, http.StatusPreconditionFailed)
		if stale.code(t) != "precondition_failed" || h.row(id).DeletedAt != nil {
			t.Fatalf("stale DELETE: %s", stale.Body)
		}
		wantStatus(t, h.do("DELETE", invoicePath(id), "tok2", nil, "If-Match", replaced.Header.Get("ETag")), http.StatusNotFound)
		del := h.do("DELETE", invoicePath(id), "tok1", nil, "If-Match", replaced.Header.Get("ETag"))
		wantStatus(t, del, http.StatusNoContent)
		if len(del.Body) != 0 || h.row(id).DeletedAt == nil {
			t.Fatalf("DELETE: %s %+v", del.Body, h.row(id))
		}
		wantStatus(t, h.do("DELETE", invoicePath(id), "tok1", nil, "If-Match", "*"), http.StatusNotFound)
	})
}

// TestCreateETagStaysCurrentOnTheApplicationsTable: on the application's
// own *gorm.DB, whose AutoMigrate makes the time columns gorm's default
// makes (DATETIME(3) on MariaDB, milliseconds where the database clock has
// microseconds), the ETag and the body a create answers are the stored
// resource's: a later GET answers them byte for byte, and an If-Match with
// the create's ETag applies, every time, whether the create inserted first
// (stamped with the estimated clock) or read first.
func TestCreateETagStaysCurrentOnTheApplicationsTable(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		for _, readFirst := range []bool{false, true} {
			stmts := &statements{}
			h := setup(t, dsn, countStatements(stmts), func(o *setupOptions) {
				o.resource = func(r *collection.Resource[InvoiceCommand, Invoice]) { r.ReadFirst = readFirst }
			})
			differed, mismatched, insertedFirst := 0, 0, 0
			var first string
			for i := range 20 {
				id := uuid.New()
				stmts.reads("invoices")
				created := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", i))
				wantStatus(t, created, http.StatusCreated)
				if stmts.reads("invoices") == 0 {
					insertedFirst++
				}
				got := h.do("GET", invoicePath(id), "tok1", nil)
				wantStatus(t, got, http.StatusOK)
				if !bytes.Equal(got.Body, created.Body) || got.Header.Get("ETag") != created.Header.Get("ETag") {
					differed++
					first = fmt.Sprintf("the create answered %s %s, a GET %s %s",
						created.Header.Get("ETag"), created.Body, got.Header.Get("ETag"), got.Body)
				}
				replaced := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_2", i), "If-Match", created.Header.Get("ETag"))
				if replaced.Status != http.StatusOK || replaced.view(t).Version != 2 || replaced.view(t).Customer != "cus_2" {
					mismatched++
				}
			}
			if differed > 0 || mismatched > 0 {
				t.Fatalf("read first %v: %d of 20 creates answered another body or ETag than a GET (%s); "+
					"%d of 20 replaces with the create's ETag in If-Match did not apply", readFirst, differed, first, mismatched)
			}
			if readFirst != (insertedFirst == 0) {
				t.Fatalf("read first %v: %d creates inserted first", readFirst, insertedFirst)
			}
		}
	})
}

func itoa(n int) string { return strconv.Itoa(n) }

// TestTombstones: DELETE, then 404 for GET and DELETE and 410 for PUT while
// the tombstone lasts; after it the ID is free, a new incarnation with its
// own child rows and its own creation-hook row.
func TestTombstones(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		id := uuid.New()
		first := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 1, 2))
		wantStatus(t, first, http.StatusCreated)
		wantStatus(t, h.do("DELETE", invoicePath(id), "tok1", nil), http.StatusNoContent)
		wantStatus(t, h.do("DELETE", invoicePath(id), "tok1", nil), http.StatusNotFound)
		wantStatus(t, h.do("GET", invoicePath(id), "tok1", nil), http.StatusNotFound)
		gone := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 1, 2))
		wantStatus(t, gone, http.StatusGone)
		if gone.code(t) != "resource_deleted" || h.row(id).DeletedAt == nil {
			t.Fatalf("PUT to a tombstone: %s", gone.Body)
		}

		// Deleted 31 days ago on the database clock: the ID is free.
		testdb.Age(t, h.db.Gorm, "invoices", 31*24*time.Hour, "tenant_id = ? AND id = ?", "t1", id)
		again := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_2", 9))
		wantStatus(t, again, http.StatusCreated)
		r := h.row(id)
		if r.DeletedAt != nil || r.Version != 1 || r.Customer != "cus_2" || len(r.Lines) != 1 || again.Header.Get("ETag") == first.Header.Get("ETag") {
			t.Fatalf("new incarnation: %+v", r)
		}
		if n := h.count("invoice_events", "invoice_id = ?", id); n != 2 {
			t.Fatalf("creation-hook rows = %d, want one per incarnation", n)
		}
	})
}

// TestConcurrentIdenticalPuts: 50 identical PUTs of a new ID give one row,
// one set of child rows, one creation-hook row, one fresh 201 and 49
// byte-identical replays.
func TestConcurrentIdenticalPuts(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, patient)
		id := uuid.New()
		const n = 50
		results := make([]reply, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				results[i] = h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 10, 20, 30))
			})
		}
		close(start)
		wg.Wait()
		fresh := 0
		for _, r := range results {
			wantStatus(t, r, http.StatusCreated)
			if r.Header.Get("Idempotent-Replayed") != "true" {
				fresh++
			}
			if !bytes.Equal(r.Body, results[0].Body) {
				t.Fatalf("bodies differ:\n%s\n%s", r.Body, results[0].Body)
			}
		}
		if fresh != 1 {
			t.Fatalf("%d fresh creates, want 1", fresh)
		}
		if rows, lines, events := h.count("invoices", "1=1"), h.count("invoice_lines", "1=1"), h.count("invoice_events", "1=1"); rows != 1 || lines != 3 || events != 1 {
			t.Fatalf("rows %d, lines %d, events %d; want 1, 3, 1", rows, lines, events)
		}
	})
}

// TestConcurrentDifferentPuts: 20 PUTs with different bodies to one ID are
// serialized: one 201, the rest 200, and version = 1 + the number of 200s;
// the stored child rows are those of one whole body.
func TestConcurrentDifferentPuts(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, patient)
		id := uuid.New()
		const n = 20
		statuses := make([]int, n)
		var wg sync.WaitGroup
		start := make(chan struct{})
		for i := range n {
			wg.Go(func() {
				<-start
				amounts := make([]int, i+1)
				for j := range amounts {
					amounts[j] = i
				}
				r := h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", amounts...))
				statuses[i] = r.Status
			})
		}
		close(start)
		wg.Wait()
		created, replaced := 0, 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusOK:
				replaced++
			default:
				t.Fatalf("status %d among %v", s, statuses)
			}
		}
		r := h.row(id)
		if created != 1 || r.Version != int64(1+replaced) {
			t.Fatalf("created %d, replaced %d, version %d", created, replaced, r.Version)
		}
		i := len(r.Lines) - 1
		if r.TotalAmount != int64((i+1)*i) || h.count("invoice_lines", "invoice_id = ?", id) != int64(i+1) {
			t.Fatalf("stored row mixes bodies: %+v", r)
		}
		for _, l := range r.Lines {
			if l.Amount != int64(i) {
				t.Fatalf("stored lines mix bodies: %+v", r.Lines)
			}
		}
		if n := h.count("invoice_events", "1=1"); n != 1 {
			t.Fatalf("creation-hook rows = %d", n)
		}
	})
}

func TestCreateOnlyRefusesADifferentBody(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(o *setupOptions) { o.mode = collection.CreateOnly })
		id := uuid.New()
		first := h.do("PUT", invoicePath(id), "tok1", invoiceBody("a", 1))
		wantStatus(t, first, http.StatusCreated)
		again := h.do("PUT", invoicePath(id), "tok1", invoiceBody("a", 1))
		if again.Status != http.StatusCreated || again.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again.Body, first.Body) {
			t.Fatalf("retry: %d %v %s", again.Status, again.Header, again.Body)
		}
		reuse := h.do("PUT", invoicePath(id), "tok1", invoiceBody("b", 1))
		wantStatus(t, reuse, http.StatusUnprocessableEntity)
		if reuse.code(t) != "idempotency_key_reuse" {
			t.Fatalf("different body: %s", reuse.Body)
		}
		if r := h.row(id); r.Customer != "a" || r.Version != 1 {
			t.Fatalf("resource changed: %+v", r)
		}
	})
}

// TestCreateOnlyPatchIs405: a PATCH of a create-only resource is 405
// method_not_allowed as problem+json with the methods its items have in
// Allow, on a router that has no 405 of its own (gin answered its
// text/plain 404), and nothing is written: the row keeps its version and
// body, no creation event. Without a token it is 401 like every route of
// the collection.
func TestCreateOnlyPatchIs405(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(o *setupOptions) { o.mode = collection.CreateOnly })
		id := uuid.New()
		wantStatus(t, h.do("PUT", invoicePath(id), "tok1", invoiceBody("a", 1)), http.StatusCreated)
		for _, ct := range []string{"application/merge-patch+json", "application/json-patch+json"} {
			r := h.do("PATCH", invoicePath(id), "tok1", []byte(`{"customer":"b"}`), "Content-Type", ct, "If-Match", `"1"`)
			wantStatus(t, r, http.StatusMethodNotAllowed)
			if r.Header.Get("Content-Type") != "application/problem+json" || r.code(t) != "method_not_allowed" ||
				r.Header.Get("Allow") != "PUT, GET, HEAD, DELETE" {
				t.Fatalf("PATCH %s: %v %s", ct, r.Header, r.Body)
			}
		}
		wantStatus(t, h.do("PATCH", invoicePath(id), "nobody", []byte(`{"customer":"b"}`)), http.StatusUnauthorized)
		if r := h.row(id); r.Customer != "a" || r.Version != 1 {
			t.Fatalf("resource changed: %+v", r)
		}
		if n := h.count("invoice_events", "1=1"); n != 1 {
			t.Fatalf("creation-hook rows = %d", n)
		}
	})
}

// TestTransactionalTwinsRollBackWithTheCaller: PutTx, PatchTx, DeleteTx
// and SetStatusTx write nothing when the caller's transaction rolls back.
func TestTransactionalTwinsRollBackWithTheCaller(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		ctx := context.Background()
		boom := errors.New("caller failed after the write")
		id := uuid.New()
		err := h.db.Write(ctx, func(tx *gorm.DB) error {
			res, err := h.col.PutTx(ctx, tx, collection.PutRequest[InvoiceCommand]{Tenant: "t1", ID: id,
				Command: InvoiceCommand{Customer: "a", Lines: []LineCommand{{Text: "x", Amount: 1}}}, Header: http.Header{}})
			if err != nil || res.Status != http.StatusCreated {
				t.Fatalf("PutTx: %+v %v", res, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Write = %v", err)
		}
		if h.count("invoices", "1=1") != 0 || h.count("invoice_lines", "1=1") != 0 || h.count("invoice_events", "1=1") != 0 {
			t.Fatalf("the put survived its caller's rollback")
		}

		wantStatus(t, h.do("PUT", invoicePath(id), "tok1", invoiceBody("a", 1)), http.StatusCreated)
		err = h.db.Write(ctx, func(tx *gorm.DB) error {
			res, err := h.col.PatchTx(ctx, tx, collection.PatchRequest{Tenant: "t1", ID: id, ContentType: collection.ContentTypeMergePatch,
				Patch: []byte(`{"customer":"b"}`), Header: http.Header{}})
			if err != nil || res.Status != http.StatusOK || !bytes.Contains(res.Body, []byte(`"version":2`)) {
				t.Fatalf("PatchTx: %+v %v", res, err)
			}
			if _, err := h.col.SetStatusTx(ctx, tx, "t1", id, "sent"); err != nil {
				t.Fatalf("SetStatusTx: %v", err)
			}
			if err := h.col.DeleteTx(ctx, tx, collection.DeleteRequest{Tenant: "t1", ID: id}); err != nil {
				t.Fatalf("DeleteTx: %v", err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Write = %v", err)
		}
		if r := h.row(id); r.Status != "draft" || r.Version != 1 || r.DeletedAt != nil || r.Customer != "a" {
			t.Fatalf("twins survived the rollback: %+v", r)
		}
	})
}

// TestPutRequestLog: one event per PUT with the fields of the POST
// fallback's events (tenant, operation, key hash, fingerprint prefix,
// outcome, replayed, status, duration) and the ID.
func TestPutRequestLog(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	h := setup(t, testdb.New(t, "sqlite"), func(o *setupOptions) { o.logger = slog.New(slog.NewJSONHandler(&logs, nil)) })
	id := uuid.New()
	wantStatus(t, h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 1)), http.StatusCreated)
	wantStatus(t, h.do("PUT", invoicePath(id), "tok1", invoiceBody("cus_1", 1)), http.StatusCreated)
	var got []string
	for line := range strings.Lines(logs.String()) {
		var ev map[string]any
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("log line %q: %v", line, err)
		}
		fp, _ := ev["fingerprint"].(string)
		if ev["msg"] != "resource write" || ev["pattern"] != "put" || ev["tenant"] != "t1" || ev["operation"] != "invoices" ||
			ev["key_sha256"] != telemetry.KeyHash(id.String()) || ev["id"] != id.String() || len(fp) != 12 || ev["duration"] == nil {
			t.Fatalf("event %v", ev)
		}
		got = append(got, fmt.Sprint(ev["outcome"], "/", ev["replayed"], "/", ev["status"]))
	}
	if want := []string{"executed/false/201", "replayed/true/201"}; !slices.Equal(got, want) {
		t.Fatalf("events %v, want %v", got, want)
	}
}

// TestLegacyPOSTLog: a legacy POST logs "legacy route used" with the
// hash of its key at Info, and nothing of it under a logger that keeps
// only warnings.
func TestLegacyPOSTLog(t *testing.T) {
	t.Parallel()
	for _, level := range []slog.Level{slog.LevelInfo, slog.LevelWarn} {
		var logs bytes.Buffer
		h := setup(t, testdb.New(t, "sqlite"), func(o *setupOptions) {
			o.logger = slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: level}))
		})
		legacy := h.legacy()
		key := "legacy-" + uuid.NewString()
		for range 2 {
			wantStatus(t, legacy.do("POST", "/v1/invoices", "tok1", invoiceBody("cus_1", 1), "Idempotency-Key", key), http.StatusCreated)
		}
		var used []map[string]any
		for line := range strings.Lines(logs.String()) {
			var ev map[string]any
			if err := json.Unmarshal([]byte(line), &ev); err != nil {
				t.Fatalf("log line %q: %v", line, err)
			}
			if ev["msg"] == "legacy route used" {
				used = append(used, ev)
			}
		}
		want := 2
		if level > slog.LevelInfo {
			want = 0
		}
		if len(used) != want {
			t.Fatalf("level %v: %d legacy events, want %d: %s", level, len(used), want, logs.String())
		}
		for _, ev := range used {
			if ev["key_sha256"] != telemetry.KeyHash(key) || ev["tenant"] != "t1" || ev["resource"] != "invoices" {
				t.Fatalf("event %v", ev)
			}
		}
		if n := h.count("invoices", "tenant_id = ?", "t1"); n != 1 {
			t.Fatalf("%d invoices, want 1", n)
		}
	}
}
