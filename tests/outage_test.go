package tests

import (
	"io"
	"net"
	"net/http"
	"net/url"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// tcpProxy forwards connections to target until it is cut; cutting it
// closes the listener and every open connection, as a network partition or
// a database crash would.
type tcpProxy struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  []net.Conn
}

func startProxy(t *testing.T, target string) *tcpProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &tcpProxy{target: target, addr: ln.Addr().String()}
	p.serve(ln)
	t.Cleanup(p.cut)
	return p
}

func (p *tcpProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			client, err := ln.Accept()
			if err != nil {
				return
			}
			server, err := net.Dial("tcp", p.target)
			if err != nil {
				client.Close()
				continue
			}
			p.mu.Lock()
			p.conns = append(p.conns, client, server)
			p.mu.Unlock()
			go func() { _, _ = io.Copy(server, client); server.Close() }()
			go func() { _, _ = io.Copy(client, server); client.Close() }()
		}
	}()
}

func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for _, c := range p.conns {
		c.Close()
	}
	p.conns = nil
}

// restore listens again on the same address.
func (p *tcpProxy) restore(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("re-listen on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// TestDatabaseOutageIs503 cuts the connection between the API and
// PostgreSQL: every request of either pattern answers 503 unavailable
// (never a made-up success), and once the database is back nothing
// half-written is there and the same IDs and keys execute once.
func TestDatabaseOutageIs503(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t, "postgres")
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.addr
	e := newEnv(t, u.String())

	kept := uuid.New()
	wantStatus(t, e.do("PUT", orderPath(kept), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)

	proxy.cut()
	lost := uuid.New()
	for _, r := range []response{
		e.do("PUT", orderPath(lost), tokenAcme, orderBody(1, "1.00")),
		e.do("PUT", orderPath(kept), tokenAcme, orderBody(2, "1.00")),
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
	if n := e.count("idempotency_records", ""); n != 0 {
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
