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
		m.perRequest(e.app, what, n, want, send)
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
