package tests

import (
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestSilentPartitionIs503WithinTheDeadline puts a silent partition between
// the API and its database, on each server configured (PostgreSQL,
// MariaDB): requests of both patterns and the readiness check answer 503
// unavailable + Retry-After within the request deadline instead of
// hanging, /healthz stays 200, and once the network heals the same IDs and
// keys execute, once, without a restart.
func TestSilentPartitionIs503WithinTheDeadline(t *testing.T) {
	t.Parallel()
	for _, server := range testdb.Servers(t) {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			silentPartitionIs503(t, testdb.New(t, server))
		})
	}
}

// silentPartitionIs503 is TestSilentPartitionIs503WithinTheDeadline on the
// database dsn.
func silentPartitionIs503(t *testing.T, dsn string) {
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	// A silent partition: held, the proxy forwards nothing and opens no
	// upstream connection, but refuses and closes nothing either.
	proxy, err := retrysafetest.StartProxy(u.Host, retrysafetest.ProxyConfig{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	u.Host = proxy.Addr()
	const deadline = 2 * time.Second
	e := newEnv(t, u.String(), func(c *app.Config) { c.RequestDeadline = deadline })
	wantStatus(t, e.do("GET", "/readyz", "", nil), http.StatusOK)
	kept := uuid.New()
	wantStatus(t, e.do("PUT", orderPath(kept), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)

	proxy.Hold()
	lost := uuid.New()
	requests := []struct {
		method, path string
		body         []byte
		headers      []string
	}{
		{"PUT", orderPath(lost), orderBody(1, "1.00"), nil},
		{"GET", orderPath(kept), nil, nil},
		{"POST", "/v1/payments", paymentBody(4200, "pm_card_visa"), []string{"Idempotency-Key", "partition-payment"}},
		{"POST", "/v1/transfers", transferBody("acc_a", "acc_b", 500, "EUR"), []string{"Idempotency-Key", "partition-transfer"}},
	}
	var wg sync.WaitGroup
	results := make([]response, len(requests))
	took := make([]time.Duration, len(requests))
	for i, r := range requests {
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			results[i] = e.do(r.method, r.path, tokenAcme, r.body, r.headers...)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	for i, r := range results {
		if r.Status != http.StatusServiceUnavailable || r.Code(t) != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("%s %s during the partition: %d %v %s", requests[i].method, requests[i].path, r.Status, r.Header, r.Body)
		}
		// The deadline plus scheduling slack for a loaded machine: what
		// matters is that the answer does not wait for the partition to
		// end, and it ends only after every request was answered.
		if took[i] > deadline+20*time.Second {
			t.Fatalf("%s %s took %v through a partition, deadline %v", requests[i].method, requests[i].path, took[i], deadline)
		}
	}
	if r := e.do("GET", "/readyz", "", nil); r.Status != http.StatusServiceUnavailable || r.Code(t) != "unavailable" {
		t.Fatalf("/readyz during the partition: %d %s", r.Status, r.Body)
	}
	wantStatus(t, e.do("GET", "/healthz", "", nil), http.StatusOK)

	proxy.Release()
	// Connections abandoned at the deadline were closed; new ones work.
	var ready response
	for range 300 {
		if ready = e.do("GET", "/readyz", "", nil); ready.Status == http.StatusOK {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	wantStatus(t, ready, http.StatusOK)
	wantStatus(t, e.do("PUT", orderPath(lost), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)
	for _, r := range requests[2:] {
		res := e.do(r.method, r.path, tokenAcme, r.body, r.headers...)
		if res.Status != http.StatusCreated {
			t.Fatalf("%s %s after the partition: %d %s", r.method, r.path, res.Status, res.Body)
		}
	}
	if n := e.count("sandbox_charges", ""); n != 1 {
		t.Fatalf("sandbox charges after the partition = %d, want 1", n)
	}
	if n := e.count("transfers", ""); n != 1 {
		t.Fatalf("transfers after the partition = %d, want 1", n)
	}
}
