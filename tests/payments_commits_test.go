package tests

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestPaymentCreateCostsThreeCommits: a phased payment create commits three
// write transactions on PostgreSQL, and one read-only: the record of the
// key read first, which answers a replay alone. The claim of the key commits with the pending
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
	check("create", 4, func(i int) {
		wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("c-%d", i), paymentBody(100+i, "pm_card_visa")), http.StatusCreated)
	})
	check("decline", 4, func(i int) {
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

// TestPaymentFailPointsKeepTheCommits: with a fail point function that
// only watches, a payment commits exactly what it commits without one (the
// read first and three write transactions), so the crash and fault tests, which set one, run the
// transactions production runs.
func TestPaymentFailPointsKeepTheCommits(t *testing.T) {
	m := newCommitMeter(t)
	var reached atomic.Int64
	e := newEnvWith(t, m.DSN, func(context.Context, string, string) error {
		reached.Add(1)
		return nil
	})
	m.quiet(e.app)
	wantStatus(t, e.pay(tokenAcme, "warm-up", paymentBody(100, "pm_card_visa")), http.StatusCreated)
	const n = 40
	m.perRequest(e.app, "create with fail points", n, 4, func(i int) {
		wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("c-%d", i), paymentBody(100+i, "pm_card_visa")), http.StatusCreated)
	})
	m.perRequest(e.app, "decline with fail points", n, 4, func(i int) {
		wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("d-%d", i), paymentBody(100+i, "pm_card_declined")), http.StatusPaymentRequired)
	})
	if reached.Load() < 2*n {
		t.Fatalf("%d fail points reached by %d payments", reached.Load(), 2*n)
	}
}
