package tests

import (
	"database/sql"
	"fmt"
	"net/http"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" to watch the records

	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestStallPastLeaseChargesOnce is the double charge of a stalled attempt
// (fault suite: stall past the lease). Two demo processes share one
// PostgreSQL schema with a 2 s lease; test-only fail points of the demo
// hold A's attempts right after their claims and B's right after their
// first phase (the pending payment row), before the provider call. Process
// A claims n payment keys and is stopped (SIGSTOP) in its hold, before any
// phase. Its leases run out; process B's recovery worker takes the records
// over and releases them (nothing had happened). The client's retries on B
// claim the keys again, and while B holds them before charging, A is
// continued: its attempts wake up with fences that are no longer current,
// so they write nothing and call no provider, and B's attempts charge once
// each. Expect exactly n charges and n payments. (With an attempt number
// that restarts at 1 after a release, A's attempts matched the new claims,
// inserted their own payments and charged: 2n charges.)
func TestStallPastLeaseChargesOnce(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t, "postgres") // skips without TEST_DATABASE_URL
	bin := buildDemo(t)
	const n = 8
	short := []string{"-lease=2s", "-recovery-interval=200ms"}
	a := demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn, Args: append(short, "-pause-at=after_claim=1s")})
	b := demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn, Args: append(short, "-pause-at=after_phase:payment_created=1s")})

	db, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	count := func(query string) int {
		t.Helper()
		var c int
		if err := db.QueryRow(query).Scan(&c); err != nil {
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
				t.Fatalf("process %s did not reach the hold after its claims", name)
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
	if c := count("SELECT count(*) FROM idempotency_records WHERE state = 'in_progress'"); c != n {
		t.Fatalf("in-progress records when A stopped = %d, want %d", c, n)
	}
	// B's recovery worker releases the records once the leases end.
	deadline := time.Now().Add(30 * time.Second)
	for count("SELECT count(*) FROM idempotency_records") != 0 {
		if time.Now().After(deadline) {
			t.Fatal("B's recovery worker did not release the stalled records")
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The client retries on B: each key is claimed again; while B holds
	// those attempts, A wakes up.
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
}
