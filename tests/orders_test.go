package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func orderBody(qty int, price string) []byte {
	return fmt.Appendf(nil, `{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":%d,"unit_price":%q}],"note":"n"}`, qty, price)
}

func orderPath(id uuid.UUID) string { return "/v1/orders/" + id.String() }

// orderRow reads the engine columns of an order.
type orderRow struct {
	Version   int64
	Status    string
	UpdatedAt time.Time
	DeletedAt *time.Time
}

func (e *env) order(tenant string, id uuid.UUID) orderRow {
	e.t.Helper()
	var r orderRow
	if err := e.app.DB.Gorm.Table("orders").Select("version, status, updated_at, deleted_at").
		Where("tenant_id = ? AND id = ?", tenant, id.String()).Take(&r).Error; err != nil {
		e.t.Fatalf("read order %s: %v", id, err)
	}
	return r
}

// orderColumns reads the typed business columns of an order and its items.
type orderColumns struct {
	Customer, Currency, Note string
	TotalCents               int64
	Items                    []orderItemRow `gorm:"-"`
}

type orderItemRow struct {
	Position       int
	SKU            string
	Quantity       int64
	UnitPriceCents int64
}

func (e *env) orderColumns(tenant string, id uuid.UUID) orderColumns {
	e.t.Helper()
	var c orderColumns
	if err := e.app.DB.Gorm.Table("orders").Select("customer, currency, note, total_cents").
		Where("tenant_id = ? AND id = ?", tenant, id.String()).Take(&c).Error; err != nil {
		e.t.Fatalf("read order %s: %v", id, err)
	}
	if err := e.app.DB.Gorm.Table("order_items").Select("position, sku, quantity, unit_price_cents").
		Where("tenant_id = ? AND order_id = ?", tenant, id.String()).Order("position").Find(&c.Items).Error; err != nil {
		e.t.Fatalf("read order items %s: %v", id, err)
	}
	return c
}

// wantItems stops the test unless the order's typed columns hold one item
// of quantity qty at unit price cents.
func (e *env) wantOneItem(tenant string, id uuid.UUID, qty, cents int64) {
	e.t.Helper()
	c := e.orderColumns(tenant, id)
	want := []orderItemRow{{Position: 0, SKU: "sku_1", Quantity: qty, UnitPriceCents: cents}}
	if c.Customer != "cus_1" || c.Currency != "EUR" || c.Note != "n" || c.TotalCents != qty*cents || len(c.Items) != 1 || c.Items[0] != want[0] {
		e.t.Fatalf("typed columns = %+v, want one item %+v and total %d", c, want[0], qty*cents)
	}
}

func (e *env) events(tenant string, id uuid.UUID) int64 {
	return e.count("outbox_events", "tenant_id = ? AND aggregate_type = 'order' AND aggregate_id = ? AND type = ?", tenant, id.String(), "order.created")
}

func TestOrderCreateReplayAndConverge(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id := uuid.New()

		created := e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, created, http.StatusCreated)
		if got := created.Header.Get("Location"); got != orderPath(id) {
			t.Fatalf("Location = %q, want %q", got, orderPath(id))
		}
		if created.Header.Get("ETag") == "" || created.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("create headers: ETag %q, Idempotent-Replayed %q", created.Header.Get("ETag"), created.Header.Get("Idempotent-Replayed"))
		}
		rep := created.JSON(t)
		if rep["id"] != id.String() || rep["status"] != "draft" || rep["total"] != "20.00" || rep["version"] != float64(1) {
			t.Fatalf("representation = %s", created.Body)
		}
		before := e.order("acme", id)
		e.wantOneItem("acme", id, 2, 1000)

		// The same command in another spelling: keys reordered, "10.0" for "10.00".
		retry := e.do("PUT", orderPath(id), tokenAcme,
			[]byte(`{"note":"n","items":[{"unit_price":"10.0","quantity":2,"sku":"sku_1"}],"currency":"EUR","customer":"cus_1"}`))
		wantStatus(t, retry, http.StatusCreated)
		if retry.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry is not marked replayed: %v", retry.Header)
		}
		if !bytes.Equal(retry.Body, created.Body) {
			t.Fatalf("replayed body differs:\n%s\n%s", retry.Body, created.Body)
		}
		if retry.Header.Get("ETag") != created.Header.Get("ETag") || retry.Header.Get("Location") != orderPath(id) {
			t.Fatalf("replay headers differ: %v", retry.Header)
		}
		if after := e.order("acme", id); after != before {
			t.Fatalf("replay wrote: %+v → %+v", before, after)
		}

		// After the replay window (on the database clock: the order was
		// written 25 h ago) the same body converges with 200.
		testdb.Age(t, e.app.DB.Gorm, "orders", 25*time.Hour, "tenant_id = ? AND id = ?", "acme", id)
		before = e.order("acme", id)
		current := e.do("GET", orderPath(id), tokenAcme, nil)
		wantStatus(t, current, http.StatusOK)
		late := e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, late, http.StatusOK)
		if late.Header.Get("Idempotent-Replayed") != "" || !bytes.Equal(late.Body, current.Body) {
			t.Fatalf("late retry: headers %v body %s", late.Header, late.Body)
		}
		if after := e.order("acme", id); after != before {
			t.Fatalf("converged retry wrote: %+v → %+v", before, after)
		}
		if n := e.events("acme", id); n != 1 {
			t.Fatalf("order.created events = %d, want 1", n)
		}
		if n := e.count("orders", ""); n != 1 {
			t.Fatalf("orders rows = %d, want 1", n)
		}
		e.wantOneItem("acme", id, 2, 1000)
	})
}

// TestOrderQuantitySpellingsConverge: an item's quantity is a plain Go
// integer of the orders command, and every JSON spelling of one integer
// binds to it (DESIGN §4): a retry that spells 2 as 2.0, 2e0 or 0.2e1 is
// the create's replay (one row, one event, the same ETag and body), and a
// fraction or a value beyond int64 is 400 and stores nothing.
func TestOrderQuantitySpellingsConverge(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id := uuid.New()
		spelled := func(qty string) []byte {
			return []byte(`{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":` + qty + `,"unit_price":"10.00"}],"note":"n"}`)
		}
		created := e.do("PUT", orderPath(id), tokenAcme, spelled("2.0"))
		wantStatus(t, created, http.StatusCreated)
		before := e.order("acme", id)
		for _, qty := range []string{"2", "2e0", "0.2e1", "200e-2", "2.00E+0"} {
			retry := e.do("PUT", orderPath(id), tokenAcme, spelled(qty))
			wantReplay(t, retry, created)
		}
		if after := e.order("acme", id); after != before {
			t.Fatalf("a respelled retry wrote: %+v → %+v", before, after)
		}
		if rows, events := e.count("orders", ""), e.events("acme", id); rows != 1 || events != 1 {
			t.Fatalf("%d orders and %d order.created events, want 1 and 1", rows, events)
		}
		e.wantOneItem("acme", id, 2, 1000)

		for _, qty := range []string{"2.5", "25e-1", "1e30", "9223372036854775808"} {
			r := e.do("PUT", orderPath(uuid.New()), tokenAcme, spelled(qty))
			wantCode(t, r, http.StatusBadRequest, "validation_failed")
			errs, _ := r.JSON(t)["errors"].([]any)
			if len(errs) != 1 || errs[0].(map[string]any)["field"] != "items[0].quantity" {
				t.Fatalf("quantity %s: %s, want a failure naming items[0].quantity", qty, r.Body)
			}
		}
		if rows := e.count("orders", ""); rows != 1 {
			t.Fatalf("refused quantities stored orders: %d rows", rows)
		}
	})
}

func TestOrderReplaceAndPreconditions(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id := uuid.New()
		created := e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, created, http.StatusCreated)
		etag1 := created.Header.Get("ETag")

		replaced := e.do("PUT", orderPath(id), tokenAcme, orderBody(3, "10.00"))
		wantStatus(t, replaced, http.StatusOK)
		rep := replaced.JSON(t)
		if rep["version"] != float64(2) || rep["total"] != "30.00" {
			t.Fatalf("replaced representation = %s", replaced.Body)
		}
		etag2 := replaced.Header.Get("ETag")
		if etag2 == "" || etag2 == etag1 {
			t.Fatalf("ETag after replace = %q (before %q)", etag2, etag1)
		}
		if got := e.order("acme", id).Version; got != 2 {
			t.Fatalf("stored version = %d, want 2", got)
		}
		e.wantOneItem("acme", id, 3, 1000)

		// A stale If-Match is refused and writes nothing.
		stale := e.do("PUT", orderPath(id), tokenAcme, orderBody(4, "10.00"), "If-Match", etag1)
		wantStatus(t, stale, http.StatusPreconditionFailed)
		if code := stale.Code(t); code != "precondition_failed" {
			t.Fatalf("code = %q", code)
		}
		if got := e.order("acme", id).Version; got != 2 {
			t.Fatalf("stale If-Match wrote: version %d", got)
		}
		// The current ETag is accepted.
		fresh := e.do("PUT", orderPath(id), tokenAcme, orderBody(4, "10.00"), "If-Match", etag2)
		wantStatus(t, fresh, http.StatusOK)
		if got := e.order("acme", id).Version; got != 3 {
			t.Fatalf("version after If-Match replace = %d, want 3", got)
		}
		e.wantOneItem("acme", id, 4, 1000)

		// If-None-Match: * with the creating body replays the current
		// representation and never overwrites the later update.
		current := e.do("GET", orderPath(id), tokenAcme, nil)
		wantStatus(t, current, http.StatusOK)
		retriedCreate := e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"), "If-None-Match", "*")
		wantStatus(t, retriedCreate, http.StatusCreated)
		if retriedCreate.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(retriedCreate.Body, current.Body) {
			t.Fatalf("retried create: headers %v body %s, want current %s", retriedCreate.Header, retriedCreate.Body, current.Body)
		}
		other := e.do("PUT", orderPath(id), tokenAcme, orderBody(9, "10.00"), "If-None-Match", "*")
		wantStatus(t, other, http.StatusPreconditionFailed)
		if got := e.order("acme", id).Version; got != 3 {
			t.Fatalf("If-None-Match requests wrote: version %d", got)
		}
		e.wantOneItem("acme", id, 4, 1000)

		// If-Match on an ID that does not exist creates nothing.
		missing := uuid.New()
		wantStatus(t, e.do("PUT", orderPath(missing), tokenAcme, orderBody(1, "1"), "If-Match", etag1), http.StatusPreconditionFailed)
		if n := e.count("orders", "id = ?", missing.String()); n != 0 {
			t.Fatalf("If-Match on a missing ID stored %d rows", n)
		}
		if n := e.events("acme", id); n != 1 {
			t.Fatalf("order.created events = %d, want 1", n)
		}
	})
}

func TestOrderLockedOnceSubmitted(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id := uuid.New()
		wantStatus(t, e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00")), http.StatusCreated)
		submitted := e.do("POST", orderPath(id)+"/submit", tokenAcme, nil)
		wantStatus(t, submitted, http.StatusOK)
		if submitted.JSON(t)["status"] != "submitted" {
			t.Fatalf("submit: %s", submitted.Body)
		}
		locked := e.do("PUT", orderPath(id), tokenAcme, orderBody(5, "10.00"))
		wantStatus(t, locked, http.StatusConflict)
		if code := locked.Code(t); code != "resource_locked" {
			t.Fatalf("code = %q", code)
		}
		row := e.order("acme", id)
		if row.Status != "submitted" || row.Version != 2 {
			t.Fatalf("locked order changed: %+v", row)
		}
		// A retry of the create within the replay window is still its
		// replay (the body was never replaced; submitting changed only the
		// status), answered with the submitted order.
		same := e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, same, http.StatusCreated)
		if same.JSON(t)["status"] != "submitted" || same.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("replayed PUT: %v %s", same.Header, same.Body)
		}
	})
}

func TestOrderGetListAndTenants(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		var ids []string
		for i := range 5 {
			id := uuid.New()
			ids = append(ids, id.String())
			wantStatus(t, e.do("PUT", orderPath(id), tokenAcme, orderBody(i+1, "1.50")), http.StatusCreated)
			// Created in order, a millisecond apart at least (SQLite's
			// clock counts milliseconds).
			testdb.Age(t, e.app.DB.Gorm, "orders", time.Millisecond, "tenant_id = ?", "acme")
		}
		got := e.do("GET", orderPath(uuid.MustParse(ids[0])), tokenAcme, nil)
		wantStatus(t, got, http.StatusOK)
		if got.Header.Get("ETag") == "" || got.JSON(t)["id"] != ids[0] {
			t.Fatalf("GET: %v %s", got.Header, got.Body)
		}
		// Another tenant sees nothing: 404, never 403, and an empty list.
		foreign := e.do("GET", orderPath(uuid.MustParse(ids[0])), tokenGlobex, nil)
		wantStatus(t, foreign, http.StatusNotFound)
		if foreign.Code(t) != "not_found" {
			t.Fatalf("foreign GET: %s", foreign.Body)
		}
		empty := e.do("GET", "/v1/orders", tokenGlobex, nil)
		wantStatus(t, empty, http.StatusOK)
		if items := empty.JSON(t)["items"].([]any); len(items) != 0 {
			t.Fatalf("globex sees %d acme orders", len(items))
		}
		// The same UUID in another tenant is a different order.
		same := e.do("PUT", orderPath(uuid.MustParse(ids[0])), tokenGlobex, orderBody(7, "1.00"))
		wantStatus(t, same, http.StatusCreated)
		if e.count("orders", "id = ?", ids[0]) != 2 {
			t.Fatalf("the same ID in two tenants is not two rows")
		}

		var seen []string
		cursor := ""
		for pages := 0; ; pages++ {
			if pages > 5 {
				t.Fatalf("pagination does not end")
			}
			path := "/v1/orders?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			page := e.do("GET", path, tokenAcme, nil)
			wantStatus(t, page, http.StatusOK)
			var body struct {
				Items []struct {
					ID string `json:"id"`
				} `json:"items"`
				NextCursor *string `json:"next_cursor"`
			}
			if err := json.Unmarshal(page.Body, &body); err != nil {
				t.Fatal(err)
			}
			for _, it := range body.Items {
				seen = append(seen, it.ID)
			}
			if body.NextCursor == nil {
				break
			}
			cursor = *body.NextCursor
		}
		if len(seen) != 5 {
			t.Fatalf("listed %d orders, want 5: %v", len(seen), seen)
		}
		for i := range seen {
			if seen[i] != ids[len(ids)-1-i] {
				t.Fatalf("list is not newest first: %v, created %v", seen, ids)
			}
		}
		bad := e.do("GET", "/v1/orders?limit=0", tokenAcme, nil)
		wantStatus(t, bad, http.StatusBadRequest)
		wantStatus(t, e.do("GET", "/v1/orders?cursor=bm90LWEtdXVpZA", tokenAcme, nil), http.StatusBadRequest)
	})
}

func TestOrderDeleteTombstone(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id := uuid.New()
		wantStatus(t, e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00")), http.StatusCreated)
		wantStatus(t, e.do("DELETE", orderPath(id), tokenGlobex, nil), http.StatusNotFound)

		del := e.do("DELETE", orderPath(id), tokenAcme, nil)
		wantStatus(t, del, http.StatusNoContent)
		if len(del.Body) != 0 {
			t.Fatalf("204 with a body: %s", del.Body)
		}
		wantStatus(t, e.do("DELETE", orderPath(id), tokenAcme, nil), http.StatusNotFound)
		wantStatus(t, e.do("GET", orderPath(id), tokenAcme, nil), http.StatusNotFound)

		gone := e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, gone, http.StatusGone)
		if gone.Code(t) != "resource_deleted" {
			t.Fatalf("code: %s", gone.Body)
		}
		if row := e.order("acme", id); row.DeletedAt == nil {
			t.Fatalf("PUT to a tombstone revived it: %+v", row)
		}

		// Past the tombstone retention (deleted 31 days ago on the database
		// clock) the ID is free again.
		testdb.Age(t, e.app.DB.Gorm, "orders", 31*24*time.Hour, "tenant_id = ? AND id = ?", "acme", id)
		again := e.do("PUT", orderPath(id), tokenAcme, orderBody(3, "10.00"))
		wantStatus(t, again, http.StatusCreated)
		if row := e.order("acme", id); row.DeletedAt != nil || row.Version != 1 {
			t.Fatalf("recreated order: %+v", row)
		}
		e.wantOneItem("acme", id, 3, 1000)
		if n := e.events("acme", id); n != 2 {
			t.Fatalf("order.created events = %d, want 2 (one per incarnation)", n)
		}
	})
}

func TestOrderConcurrentIdenticalCreates(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		// The store's clock keeps a reading for the whole test, so that
		// the warm storm inserts first however slow the machine.
		e := newEnv(t, dsn, func(c *app.Config) { c.LockTimeout, c.Store.ClockMaxAge = 10*time.Second, time.Hour })
		// Cold, the first PUTs read first (the store's clock has no
		// reading yet); warm, after a create, every PUT of the storm
		// inserts first on PostgreSQL and MariaDB, and all but one find
		// the ID taken.
		for _, warm := range []bool{false, true} {
			if warm {
				wantStatus(t, e.do("PUT", orderPath(uuid.New()), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)
			}
			id := uuid.New()
			const n = 50
			results := make([]response, n)
			var wg sync.WaitGroup
			for i := range n {
				wg.Go(func() { results[i] = e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00")) })
			}
			wg.Wait()
			fresh := 0
			var first []byte
			for _, r := range results {
				if r.Status != http.StatusCreated {
					t.Fatalf("warm=%v: status %d: %s", warm, r.Status, r.Body)
				}
				if r.Header.Get("Idempotent-Replayed") != "true" {
					fresh++
				}
				if first == nil {
					first = r.Body
				} else if !bytes.Equal(first, r.Body) {
					t.Fatalf("warm=%v: bodies differ:\n%s\n%s", warm, first, r.Body)
				}
			}
			if fresh != 1 {
				t.Fatalf("warm=%v: %d responses were not replays, want exactly 1", warm, fresh)
			}
			if rows, events := e.count("orders", "id = ?", id), e.events("acme", id); rows != 1 || events != 1 {
				t.Fatalf("warm=%v: rows = %d, events = %d; want 1 and 1", warm, rows, events)
			}
			if items := e.count("order_items", "order_id = ?", id); items != 1 {
				t.Fatalf("warm=%v: order_items rows = %d, want 1", warm, items)
			}
		}
	})
}

func TestOrderConcurrentReplaces(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, patient)
		id := uuid.New()
		const n = 20
		statuses := make([]int, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Go(func() {
				r := e.do("PUT", orderPath(id), tokenAcme, orderBody(i+1, "1.00"))
				statuses[i] = r.Status
			})
		}
		wg.Wait()
		created, replaced := 0, 0
		for _, s := range statuses {
			switch s {
			case http.StatusCreated:
				created++
			case http.StatusOK:
				replaced++
			default:
				t.Fatalf("unexpected status %d among %v", s, statuses)
			}
		}
		if created != 1 {
			t.Fatalf("%d creates, want 1: %v", created, statuses)
		}
		if got := e.order("acme", id).Version; got != int64(1+replaced) {
			t.Fatalf("final version = %d, want 1 + %d replaces", got, replaced)
		}
		if n := e.events("acme", id); n != 1 {
			t.Fatalf("order.created events = %d, want 1", n)
		}
		c := e.orderColumns("acme", id)
		if len(c.Items) != 1 || c.TotalCents != c.Items[0].Quantity*100 || e.count("order_items", "") != 1 {
			t.Fatalf("the stored order mixes bodies: %+v", c)
		}
	})
}

// TestOrderLockTimeoutIsRequestInProgress: a replace that waits for its
// row's lock longer than the lock timeout is 409 request_in_progress and
// writes nothing (on SQLite, where it waits for the database's write lock,
// 503 unavailable); once the lock is gone it goes through.
func TestOrderLockTimeoutIsRequestInProgress(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, func(c *app.Config) { c.LockTimeout = 300 * time.Millisecond })
		id := uuid.New()
		wantStatus(t, e.do("PUT", orderPath(id), tokenAcme, orderBody(2, "10.00")), http.StatusCreated)

		// Another transaction holds the order's row lock (on SQLite: the
		// database write lock) until released.
		locked, release := make(chan struct{}), make(chan struct{})
		done := make(chan error, 1)
		go func() {
			done <- e.app.DB.Write(context.Background(), func(tx *gorm.DB) error {
				var r orderRow
				if err := e.app.DB.Driver.LockRow(tx.Table("orders")).Where("id = ?", id.String()).Take(&r).Error; err != nil {
					return err
				}
				close(locked)
				<-release
				return nil
			})
		}()
		<-locked
		busy := e.do("PUT", orderPath(id), tokenAcme, orderBody(3, "10.00"))
		close(release)
		if err := <-done; err != nil {
			t.Fatalf("lock holder: %v", err)
		}
		wantBusy(t, dsn, busy)
		if got := e.order("acme", id).Version; got != 1 {
			t.Fatalf("timed-out replace wrote: version %d", got)
		}
		// Once the lock is gone the same request goes through.
		wantStatus(t, e.do("PUT", orderPath(id), tokenAcme, orderBody(3, "10.00")), http.StatusOK)
	})
}

func TestOrderBadInputStoresNothing(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		deep := strings.Repeat(`{"a":`, 5000) + "1" + strings.Repeat("}", 5000)
		huge := append([]byte(`{"customer":"`), bytes.Repeat([]byte("x"), 2<<20)...)
		huge = append(huge, `"}`...)
		cases := []struct {
			name, token, path string
			body              []byte
			status            int
			code              string
		}{
			{"malformed JSON", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":`), 400, "malformed_json"},
			{"duplicate keys", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":"a","customer":"b","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`), 400, "malformed_json"},
			{"invalid UTF-8", tokenAcme, orderPath(uuid.New()), []byte("{\"customer\":\"\xff\",\"currency\":\"EUR\",\"items\":[]}"), 400, "malformed_json"},
			{"5000-deep nesting", tokenAcme, orderPath(uuid.New()), []byte(deep), 400, "malformed_json"},
			{"two JSON values", tokenAcme, orderPath(uuid.New()), append(orderBody(1, "1"), orderBody(1, "1")...), 400, "malformed_json"},
			{"empty body", tokenAcme, orderPath(uuid.New()), nil, 400, "malformed_json"},
			{"unknown field", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":"c","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}],"discount":5}`), 400, "validation_failed"},
			{"wrong type", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":"c","currency":"EUR","items":[{"sku":"s","quantity":"1","unit_price":"1"}]}`), 400, "validation_failed"},
			{"bad currency", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":"c","currency":"EURO","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`), 400, "validation_failed"},
			{"no items", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":"c","currency":"EUR","items":[]}`), 400, "validation_failed"},
			{"zero quantity", tokenAcme, orderPath(uuid.New()), orderBody(0, "1.00"), 400, "validation_failed"},
			{"three decimals", tokenAcme, orderPath(uuid.New()), orderBody(1, "1.001"), 400, "validation_failed"},
			{"negative price", tokenAcme, orderPath(uuid.New()), orderBody(1, "-1.00"), 400, "validation_failed"},
			{"NUL in a text", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":"a\u0000b","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`), 400, "validation_failed"},
			{"NUL in a note", tokenAcme, orderPath(uuid.New()), []byte(`{"customer":"a","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}],"note":"\\\u0000"}`), 400, "validation_failed"},
			{"2 MiB body", tokenAcme, orderPath(uuid.New()), huge, 413, "payload_too_large"},
			{"invalid UUID", tokenAcme, "/v1/orders/not-a-uuid", orderBody(1, "1"), 400, "invalid_resource_id"},
			{"nil UUID", tokenAcme, orderPath(uuid.Nil), orderBody(1, "1"), 400, "invalid_resource_id"},
			{"missing token", "", orderPath(uuid.New()), orderBody(1, "1"), 401, "unauthenticated"},
			{"unknown token", "sk_test_nobody", orderPath(uuid.New()), orderBody(1, "1"), 401, "unauthenticated"},
		}
		for _, tc := range cases {
			r := e.do("PUT", tc.path, tc.token, tc.body)
			if r.Status != tc.status {
				t.Fatalf("%s: status %d, want %d: %s", tc.name, r.Status, tc.status, r.Body)
			}
			if code := r.Code(t); code != tc.code {
				t.Fatalf("%s: code %q, want %q", tc.name, code, tc.code)
			}
			if p := r.JSON(t); p["status"] != float64(tc.status) || p["title"] == "" || p["type"] == "" {
				t.Fatalf("%s: problem body %s", tc.name, r.Body)
			}
		}
		r := e.do("PUT", orderPath(uuid.New()), tokenAcme, orderBody(0, "1.001"))
		errs, _ := r.JSON(t)["errors"].([]any)
		if len(errs) == 0 {
			t.Fatalf("validation problem lists no fields: %s", r.Body)
		}
		if rows, items, events := e.count("orders", ""), e.count("order_items", ""), e.count("outbox_events", ""); rows != 0 || items != 0 || events != 0 {
			t.Fatalf("bad input stored %d orders, %d items and %d events", rows, items, events)
		}
	})
}

// TestOrderListFilters: ?status= and ?customer= select on the typed
// columns, newest first, and the representation keeps decimal strings.
func TestOrderListFilters(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		var ids []uuid.UUID
		for i := range 6 {
			id := uuid.New()
			ids = append(ids, id)
			body := fmt.Appendf(nil, `{"customer":"cus_%d","currency":"EUR","items":[{"sku":"s","quantity":3,"unit_price":"0.1"},{"sku":"t","quantity":1,"unit_price":"10"}]}`, i%2)
			wantStatus(t, e.do("PUT", orderPath(id), tokenAcme, body), http.StatusCreated)
			testdb.Age(t, e.app.DB.Gorm, "orders", time.Millisecond, "tenant_id = ?", "acme")
		}
		wantStatus(t, e.do("POST", orderPath(ids[1])+"/submit", tokenAcme, nil), http.StatusOK)
		list := func(query string) []map[string]any {
			t.Helper()
			r := e.do("GET", "/v1/orders?"+query, tokenAcme, nil)
			wantStatus(t, r, http.StatusOK)
			var page struct {
				Items []map[string]any `json:"items"`
			}
			if err := json.Unmarshal(r.Body, &page); err != nil {
				t.Fatal(err)
			}
			return page.Items
		}
		ids1 := func(items []map[string]any) []string {
			var out []string
			for _, it := range items {
				out = append(out, it["id"].(string))
			}
			return out
		}
		if got, want := ids1(list("customer=cus_1")), []string{ids[5].String(), ids[3].String(), ids[1].String()}; fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("customer=cus_1: %v, want %v", got, want)
		}
		submitted := list("status=submitted")
		if len(submitted) != 1 || submitted[0]["id"] != ids[1].String() || submitted[0]["total"] != "10.30" {
			t.Fatalf("status=submitted: %v", submitted)
		}
		items := submitted[0]["items"].([]any)
		if first := items[0].(map[string]any); first["unit_price"] != "0.10" || first["quantity"] != float64(3) {
			t.Fatalf("items on the wire: %v", items)
		}
		if got := list("status=draft&customer=cus_1"); len(got) != 2 {
			t.Fatalf("status=draft&customer=cus_1: %d items", len(got))
		}
		if got := list("status=submitted&customer=cus_0"); len(got) != 0 {
			t.Fatalf("status=submitted&customer=cus_0: %d items", len(got))
		}
	})
}
