package tests

import (
	"net/http"
	"net/url"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// tcpProxy is a [retrysafetest.Proxy] to the database, with the shorthands the
// outage tests use; it is closed when the test ends.
type tcpProxy struct {
	*retrysafetest.Proxy
	addr string
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	p, err := retrysafetest.StartProxy(target, retrysafetest.ProxyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return &tcpProxy{Proxy: p, addr: p.Addr()}
}

// cut closes every connection and refuses new ones, as a crashed database.
func (p *tcpProxy) cut() { p.Cut() }

// restore accepts connections again on the same address.
func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	if err := p.Restore(); err != nil {
		t.Fatalf("re-listen on %s: %v", p.addr, err)
	}
}

// TestDatabaseOutageIs503 cuts the connection between the API and its
// database, on each server configured (PostgreSQL, MariaDB): every request
// of either pattern answers 503 unavailable (never a made-up success, a
// retry of bytes the replay caches hold included), and once the database
// is back nothing half-written is there and the same IDs and keys execute
// once.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	for _, server := range testdb.Servers(t) {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			databaseOutageIs503(t, testdb.New(t, server))
		})
	}
}

// databaseOutageIs503 is TestDatabaseOutageIs503 on the database dsn.
func databaseOutageIs503(t *testing.T, dsn string) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.addr
	e := newEnv(t, u.String())

	kept := uuid.New()
	wantStatus(t, e.do("PUT", orderPath(kept), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)
	// Replayed, so that the replay caches hold these bytes: a retry of
	// them still reads its row or record, and answers 503 without it.
	keptTransfer := transferBody("acc_a", "acc_b", 100, "EUR")
	for range 2 {
		wantStatus(t, e.do("PUT", orderPath(kept), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)
	}
	for range 3 {
		wantStatus(t, e.do("POST", "/v1/transfers", tokenAcme, keptTransfer, "Idempotency-Key", "kept-transfer"), http.StatusCreated)
	}

	proxy.cut()
	lost := uuid.New()
	for _, r := range []response{
		e.do("PUT", orderPath(lost), tokenAcme, orderBody(1, "1.00")),
		e.do("PUT", orderPath(kept), tokenAcme, orderBody(2, "1.00")),
		e.do("PUT", orderPath(kept), tokenAcme, orderBody(1, "1.00")),
		e.do("POST", "/v1/transfers", tokenAcme, keptTransfer, "Idempotency-Key", "kept-transfer"),
		e.do("GET", orderPath(kept), tokenAcme, nil),
		e.do("GET", "/v1/orders", tokenAcme, nil),
		e.do("DELETE", orderPath(kept), tokenAcme, nil),
		e.do("POST", "/v1/transfers", tokenAcme, transferBody("acc_a", "acc_b", 500, "EUR"), "Idempotency-Key", "outage-transfer"),
		e.do("POST", "/v1/payments", tokenAcme, paymentBody(4200, "pm_card_visa"), "Idempotency-Key", "outage-payment"),
	} {
		if r.Status != http.StatusServiceUnavailable {
			t.Fatalf("status during outage = %d, want 503: %s", r.Status, r.Body)
		}
		if r.Code(t) != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("outage problem: %v %s", r.Header, r.Body)
		}
	}

	proxy.restore(t)
	if e.count("orders", "id = ?", lost.String()) != 0 {
		t.Fatalf("a create that answered 503 was committed")
	}
	if row := e.order("acme", kept); row.Version != 1 || row.DeletedAt != nil {
		t.Fatalf("writes that answered 503 changed the order: %+v", row)
	}
	if n := e.count("idempotency_records", "idem_key <> ?", "kept-transfer"); n != 0 {
		t.Fatalf("POSTs that answered 503 left %d idempotency records", n)
	}
	// Retries with the same ID or key now execute, once: 503 is safe to retry.
	wantStatus(t, e.do("PUT", orderPath(lost), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)
	for _, r := range []response{
		e.do("POST", "/v1/transfers", tokenAcme, transferBody("acc_a", "acc_b", 500, "EUR"), "Idempotency-Key", "outage-transfer"),
		e.do("POST", "/v1/payments", tokenAcme, paymentBody(4200, "pm_card_visa"), "Idempotency-Key", "outage-payment"),
	} {
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the first success after an outage is marked replayed: %s", r.Body)
		}
	}
	if n := e.count("sandbox_charges", ""); n != 1 {
		t.Fatalf("sandbox charges = %d, want 1", n)
	}
}
