package tests

import (
	"fmt"
	"net/http"
	"testing"
)

// TestPaymentCreateCostsThreeCommits: a phased payment create commits three
// transactions on PostgreSQL. The claim of the key commits with the pending
// payment row and its recovery point (ClaimInFirstPhase); the renewal
// before the provider call makes no round trip, since that phase has just
// set the lease (Run.RenewFor); the sandbox provider commits its charge
// (its ledger lives in the same database, as another system's would not);
// the charge, its outbox event, the last recovery point and the stored
// response commit together (Run.Complete). A replay is one read-only
// transaction. Declines cost the same as successes.
func TestPaymentCreateCostsThreeCommits(t *testing.T) {
	m := newCommitMeter(t)
	e := newEnv(t, m.DSN)
	m.quiet(e.app)
	wantStatus(t, e.pay(tokenAcme, "warm-up", paymentBody(100, "pm_card_visa")), http.StatusCreated)

	const n = 40
	check := func(what string, want int, send func(i int)) {
		t.Helper()
		before := m.commits(e.app)
		for i := range n {
			send(i)
		}
		after := m.commits(e.app)
		perRequest := float64(after-before) / n
		t.Logf("%s: %d commits for %d requests (%.3f per request)", what, after-before, n, perRequest)
		// Tolerance: commits no request caused. Two from the reopened
		// pool's ping (see TestTransferCommitsOneWriteTransaction), and up to
		// four from the pool's new connections: pgx prepares a connection's
		// first BEGIN in a round trip of its own, ended by a Sync outside
		// any transaction, which PostgreSQL counts as one.
		if perRequest > float64(want)+6.0/n {
			t.Fatalf("%s: %.3f commits per request, want at most %d", what, perRequest, want)
		}
		if after-before < int64(want*n) {
			t.Fatalf("%s: %d commits for %d requests: the counter did not see every request", what, after-before, n)
		}
	}
	check("create", 3, func(i int) {
		wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("c-%d", i), paymentBody(100+i, "pm_card_visa")), http.StatusCreated)
	})
	check("decline", 3, func(i int) {
		wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("d-%d", i), paymentBody(100+i, "pm_card_declined")), http.StatusPaymentRequired)
	})
	check("replay", 1, func(i int) {
		r := e.pay(tokenAcme, fmt.Sprintf("c-%d", i), paymentBody(100+i, "pm_card_visa"))
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("not a replay: %v", r.Header)
		}
	})
	if got := len(e.charges(tokenAcme, "")); got != 2*n+1 {
		t.Fatalf("%d sandbox charges, want %d", got, 2*n+1)
	}
}
