package tests

import (
	"bytes"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
)

// TestOrderCreateCommitsOneTransaction: on PostgreSQL a PUT create inserts
// first, so that its order, item and outbox event commit in one
// transaction with no read before it, and none rolls back. The first
// retry of each, which this process has not replayed, inserts first while
// most PUTs lately created, finds the ID taken, rolls back and reads (one
// commit, the read); once a half of the PUTs find their row, the retries
// read first. A second retry is answered from the replay cache with one
// read. Every order has one item and one event.
func TestOrderCreateCommitsOneTransaction(t *testing.T) {
	m := newCommitMeter(t)
	// A reading of the database clock holds for the whole test (the
	// meter's waits take seconds), so that which PUTs insert first never
	// depends on the machine's speed.
	e := newEnv(t, m.DSN, func(c *app.Config) { c.Store.ClockMaxAge = time.Hour })
	m.quiet(e.app)
	wantStatus(t, e.do("PUT", orderPath(uuid.New()), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)

	const n = 40
	ids := make([]uuid.UUID, n)
	created := make([][]byte, n)
	for i := range ids {
		ids[i] = uuid.New()
	}
	rolledBack := m.rollbacks(e.app)
	m.perRequest(e.app, "create", n, 1, func(i int) {
		r := e.do("PUT", orderPath(ids[i]), tokenAcme, orderBody(i+1, "2.50"))
		wantStatus(t, r, http.StatusCreated)
		created[i] = r.Body
	})
	if rb := m.rollbacks(e.app) - rolledBack; rb != 0 {
		t.Fatalf("creates of new IDs rolled back %d transactions", rb)
	}
	// The average passes a half after eleven PUTs that found their row
	// (collection.insertFirst): the first eleven retries insert first,
	// and roll back, the rest read first. The second round is answered
	// from the replay cache.
	for round, want := range []int64{11, 0} {
		rolledBack = m.rollbacks(e.app)
		m.perRequest(e.app, "retry", n, 1, func(i int) {
			r := e.do("PUT", orderPath(ids[i]), tokenAcme, orderBody(i+1, "2.50"))
			if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(r.Body, created[i]) {
				t.Fatalf("retry %d: %d %v %s, want the create's 201 byte for byte", i, r.Status, r.Header, r.Body)
			}
		})
		rb := m.rollbacks(e.app) - rolledBack
		t.Logf("retry round %d: %d rolled back", round+1, rb)
		if rb != want {
			t.Fatalf("retry round %d: %d transactions rolled back, want %d", round+1, rb, want)
		}
	}
	for i, id := range ids {
		if items, events := e.count("order_items", "order_id = ?", id), e.events("acme", id); items != 1 || events != 1 {
			t.Fatalf("order %d: %d items, %d events", i, items, events)
		}
	}
}
