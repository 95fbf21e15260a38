package tests

import (
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestStallPastLeaseChargesOnce is the double charge of a stalled attempt
// (fault suite: stall past the lease). Two demo processes share one
// database, on each server configured (PostgreSQL, MariaDB), with a 2 s
// lease; a test-only fail point of the demo holds every attempt right
// after the transaction that claimed its key or took its record over
// (after_claim). For a payment, which claims its key in its first phase,
// that transaction also committed the pending payment row: the hold sits
// before the provider call, where production can stall.
// Process A claims n payment keys and is stopped (SIGSTOP) in its hold.
// Its leases run out; the client's retries on B take the records over and
// hold too, and then A is continued: its attempts wake up (as their hold
// ends, before or after B's attempts finish) with fences that are no
// longer current, so they write nothing and call no provider, and B's
// attempts resume from the pending payments and charge once each.
// Expect exactly n charges and n payments. The recovery workers stay idle
// (a long interval), so that the retries make the takeovers.
func TestStallPastLeaseChargesOnce(t *testing.T) {
	t.Parallel()
	servers := testdb.Servers(t)
	bin := buildDemo(t)
	for _, server := range servers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			stallPastLeaseChargesOnce(t, bin, testdb.New(t, server))
		})
	}
}

// stallPastLeaseChargesOnce is TestStallPastLeaseChargesOnce on the
// database dsn.
func stallPastLeaseChargesOnce(t *testing.T, bin, dsn string) {
	const n = 8
	args := []string{"-lease=2s", "-recovery-interval=1h"}
	// A holds its attempts 10 s, long enough for a loaded machine to see
	// all eight reach the hold and stop A in it, with a request deadline
	// and a write timeout that outlast the hold. B's attempts hold 1 s,
	// within their 2 s lease, and then charge.
	a := demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn,
		Args: append(args, "-pause-at=after_claim=10s", "-request-deadline=1m", "-write-timeout=2m")})
	b := demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn, Args: append(args, "-pause-at=after_claim=1s")})

	db, err := store.Open(t.Context(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(query string) int {
		t.Helper()
		var c int
		if err := db.Gorm.Raw(query).Row().Scan(&c); err != nil {
			t.Fatalf("%s: %v", query, err)
		}
		return c
	}
	waitHolds := func(p *demoproc.Process, name string) {
		t.Helper()
		for range n {
			select {
			case <-p.Lines():
			case <-time.After(30 * time.Second):
				t.Fatalf("process %s did not reach the hold after its claims or takeovers", name)
			}
		}
	}
	client := &http.Client{Timeout: 60 * time.Second}
	key := func(i int) string { return fmt.Sprintf("stall-%d", i) }
	body := func(i int) []byte { return paymentBody(1000+i, "pm_card_visa") }
	sendAll := func(base string) ([]response, *sync.WaitGroup) {
		out := make([]response, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				r, err := post(client, base, tokenAcme, key(i), body(i))
				if err != nil {
					t.Errorf("request %d to %s: %v", i, base, err)
				}
				out[i] = r
			}()
		}
		return out, &wg
	}

	stalled, stalledDone := sendAll(a.URL())
	waitHolds(a, "A")
	if err := a.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	if c := count("SELECT count(*) FROM idempotency_records WHERE state = 'in_progress' AND recovery_point = 'payment_created'"); c != n {
		t.Fatalf("in-progress records at payment_created when A stopped = %d, want %d", c, n)
	}
	if c := count("SELECT count(*) FROM payments WHERE status = 'pending'"); c != n {
		t.Fatalf("pending payments when A stopped = %d, want %d: the claim did not commit with the first phase", c, n)
	}
	deadline := time.Now().Add(30 * time.Second)
	for count("SELECT count(*) FROM idempotency_records WHERE locked_until < "+db.Driver.Now()) != n {
		if time.Now().After(deadline) {
			t.Fatal("the stalled attempts' leases did not run out")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The client retries on B: each record is taken over; while B holds
	// those attempts, A is continued, and its attempts wake as their own
	// hold ends, before or after B's finish.
	retried, retriedDone := sendAll(b.URL())
	waitHolds(b, "B")
	if err := a.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stalledDone.Wait()
	retriedDone.Wait()
	time.Sleep(500 * time.Millisecond) // let any straggler of A finish before counting
	if c := count("SELECT count(*) FROM sandbox_charges"); c != n {
		t.Fatalf("sandbox charges = %d for %d payments: a stalled attempt charged again", c, n)
	}
	if c := count("SELECT count(*) FROM payments"); c != n {
		t.Fatalf("payments = %d, want %d", c, n)
	}
	for i := range n {
		wantStatus(t, retried[i], http.StatusCreated)
		// The woken attempt is fenced off: 409 while B's attempt runs, or
		// B's outcome.
		if r := stalled[i]; r.Status != http.StatusConflict || r.Code(t) != "request_in_progress" {
			wantReplay(t, r, retried[i])
		}
		again, err := post(client, a.URL(), tokenAcme, key(i), body(i))
		if err != nil {
			t.Fatal(err)
		}
		wantReplay(t, again, retried[i])
	}
	if c := count("SELECT count(*) FROM idempotency_records WHERE state = 'completed'"); c != n {
		t.Fatalf("completed records = %d, want %d", c, n)
	}
	// Counted again after A answered every key a second time: no attempt
	// of A charged late.
	if c := count("SELECT count(*) FROM sandbox_charges"); c != n {
		t.Fatalf("sandbox charges = %d for %d payments at the end", c, n)
	}
}
