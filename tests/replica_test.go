package tests

import (
	"bytes"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/internal/pgha"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/transfers"
)

// TestReplicaReads runs the demo on a pg_auto_failover formation with its
// hot standby as the store's replica (store.Config.ReplicaDSN), and makes
// the replica lag on purpose: the standby's replay is paused, so that it
// has not seen any commit after the pause (its WAL is still flushed, so
// synchronous commits go on). Expect, with the replica behind:
//   - a create it has not seen: GET answers the primary's representation
//     (never a 404), a PUT retry and a POST replay are the primary's (one
//     order, one transfer), and only a list shows the replica's page from
//     before the create, unless the request says Cache-Control: no-cache;
//   - a replace it has not seen: a plain GET is the replica's older
//     version (as of a moment ago), but a GET whose If-None-Match names
//     the newer version is the primary's 304, one with no-cache the
//     newer body, and a PUT retry of the older body is decided by the
//     primary (a replace to version 3), never replayed as converged;
//   - a completed POST record is final: the replica's copy answers the
//     replay (shown by deleting the primary's, as a janitor on a clock
//     ahead would), except within a minute of the record's window end,
//     when the primary decides;
//   - a replica that goes silent (a proxy holding its bytes) or whose
//     pool is gone: GET, list and a POST replay are the primary's, never
//     an error, the silent one within the request's deadline.
func TestReplicaReads(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t) // part of the PostgreSQL suite: skip without TEST_DATABASE_URL
	f := pgha.Start(t, pgha.Config{})
	// The replica is reached through a proxy that can go silent.
	standby := f.Standby()
	proxy, err := retrysafetest.StartProxy(net.JoinHostPort("127.0.0.1", strconv.Itoa(standby.Port)), retrysafetest.ProxyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	replicaDSN := strings.Replace(f.NodeURL(standby), "127.0.0.1:"+strconv.Itoa(standby.Port), proxy.Addr(), 1)
	// A replica read has 3 s (500 ms by default), so that a loaded
	// machine's slow read is not taken for a silent replica and answered
	// by the primary; a silent one (step 4) still costs less than the
	// request's deadline.
	e := newEnv(t, f.DSN(), func(c *app.Config) { c.Store.ReplicaDSN, c.Store.ReplicaTimeout = replicaDSN, 3*time.Second })
	if e.app.DB.Replica() == nil {
		t.Fatal("the store has no replica handle")
	}
	version := func(r response) float64 {
		t.Helper()
		v, _ := r.JSON(t)["version"].(float64)
		return v
	}
	listIDs := func(headers ...string) map[string]bool {
		t.Helper()
		r := e.do(http.MethodGet, "/v1/orders?limit=100", tokenAcme, nil, headers...)
		wantStatus(t, r, http.StatusOK)
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatalf("list: %v: %s", err, r.Body)
		}
		ids := map[string]bool{}
		for _, it := range page.Items {
			ids[it.ID] = true
		}
		return ids
	}

	// 1. A create the replica has not seen.
	f.PauseReplay()
	id := uuid.New()
	created := e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(1, "10.00"))
	wantStatus(t, created, http.StatusCreated)
	got := e.do(http.MethodGet, orderPath(id), tokenAcme, nil)
	wantStatus(t, got, http.StatusOK)
	if got.Header.Get("ETag") != created.Header.Get("ETag") || !bytes.Equal(got.Body, created.Body) {
		t.Fatalf("GET of a create the replica has not seen = %s %s; want the primary's %s", got.Header.Get("ETag"), got.Body, created.Body)
	}
	if head := e.do(http.MethodHead, orderPath(id), tokenAcme, nil); head.Status != http.StatusOK || head.Header.Get("ETag") != created.Header.Get("ETag") {
		t.Fatalf("HEAD = %d %q", head.Status, head.Header.Get("ETag"))
	}
	wantReplay(t, e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(1, "10.00")), created)
	if listIDs()[id.String()] {
		t.Fatal("the lagging replica's list shows the new order: the list was not read on the replica")
	}
	if !listIDs("Cache-Control", "no-cache")[id.String()] {
		t.Fatal("a list with Cache-Control: no-cache misses the new order")
	}
	body := transferBody("acc_a", "acc_b", 500, "EUR")
	first := e.transfer(tokenAcme, "rp-1", body)
	wantStatus(t, first, http.StatusCreated)
	wantReplay(t, e.transfer(tokenAcme, "rp-1", body), first)
	if n := e.count("orders", "tenant_id = ?", "acme"); n != 1 {
		t.Fatalf("%d orders, want 1", n)
	}
	if n := e.count("transfers", "tenant_id = ?", "acme"); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}

	// 2. A replace the replica has not seen.
	f.ResumeReplay()
	f.PauseReplay()
	v2 := e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(2, "10.00"))
	wantStatus(t, v2, http.StatusOK)
	if version(v2) != 2 {
		t.Fatalf("replace: version %v, want 2: %s", version(v2), v2.Body)
	}
	stale := e.do(http.MethodGet, orderPath(id), tokenAcme, nil)
	if stale.Status != http.StatusOK || !bytes.Equal(stale.Body, created.Body) {
		t.Fatalf("a plain GET = %d %s; want the replica's version 1 %s (the GET was not read on the replica)", stale.Status, stale.Body, created.Body)
	}
	if r := e.do(http.MethodGet, orderPath(id), tokenAcme, nil, "If-None-Match", v2.Header.Get("ETag")); r.Status != http.StatusNotModified ||
		r.Header.Get("ETag") != v2.Header.Get("ETag") {
		t.Fatalf("If-None-Match of version 2 = %d %q %s; want the primary's 304", r.Status, r.Header.Get("ETag"), r.Body)
	}
	if r := e.do(http.MethodGet, orderPath(id), tokenAcme, nil, "Cache-Control", "no-cache"); !bytes.Equal(r.Body, v2.Body) {
		t.Fatalf("no-cache GET = %s; want version 2 %s", r.Body, v2.Body)
	}
	older := e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(1, "10.00"))
	wantStatus(t, older, http.StatusOK)
	if version(older) != 3 || older.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("a retry of the older body = version %v, replayed %q: %s; want the primary's replace to version 3",
			version(older), older.Header.Get("Idempotent-Replayed"), older.Body)
	}

	// 3. A completed record is final: the replica's copy answers.
	rec := e.transferRecord("acme", "rp-1")
	if err := e.app.DB.Gorm.Exec("DELETE FROM idempotency_records WHERE tenant_id = ? AND operation = ? AND idem_key = ?",
		"acme", transfers.Operation, "rp-1").Error; err != nil {
		t.Fatal(err)
	}
	wantReplay(t, e.transfer(tokenAcme, "rp-1", body), first)
	if n := e.count("transfers", "tenant_id = ?", "acme"); n != 1 {
		t.Fatalf("%d transfers after the replica's replay, want 1", n)
	}
	// Within a minute of the window's end the primary decides; it has no
	// record now, so it executes the transfer again.
	e.clock.Advance(rec.ExpiresAt.Sub(e.clock.Now()) - 30*time.Second)
	again := e.transfer(tokenAcme, "rp-1", body)
	wantStatus(t, again, http.StatusCreated)
	if again.Header.Get("Idempotent-Replayed") != "" {
		t.Fatalf("near the window's end the replica's record answered: %v", again.Header)
	}
	if n := e.count("transfers", "tenant_id = ?", "acme"); n != 2 {
		t.Fatalf("%d transfers, want 2 (the primary executed the key it no longer had)", n)
	}

	// 4. A replica that goes silent (the proxy holds every byte) costs a
	// read its replica timeout, not the request's deadline: GET, list and
	// a POST replay are the primary's.
	proxy.Hold()
	if r := e.do(http.MethodGet, orderPath(id), tokenAcme, nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, older.Body) {
		t.Fatalf("GET with the replica silent = %d %s; want the primary's version 3 %s", r.Status, r.Body, older.Body)
	}
	if !listIDs()[id.String()] {
		t.Fatal("the list with the replica silent misses the order")
	}
	wantReplay(t, e.transfer(tokenAcme, "rp-1", body), again)
	proxy.Release()

	// 5. A replica whose pool is gone is never the answer either.
	replica, err := e.app.DB.Replica().DB()
	if err != nil {
		t.Fatal(err)
	}
	_ = replica.Close()
	if r := e.do(http.MethodGet, orderPath(id), tokenAcme, nil); r.Status != http.StatusOK || !bytes.Equal(r.Body, older.Body) {
		t.Fatalf("GET with the replica gone = %d %s; want the primary's version 3 %s", r.Status, r.Body, older.Body)
	}
	if !listIDs()[id.String()] {
		t.Fatal("the list with the replica gone misses the order")
	}
	wantReplay(t, e.transfer(tokenAcme, "rp-1", body), again)
	if n := e.count("transfers", "tenant_id = ?", "acme"); n != 2 {
		t.Fatalf("%d transfers after a replay with the replica gone, want 2", n)
	}
	f.ResumeReplay()
}
