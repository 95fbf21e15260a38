package tests

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"gorm.io/gorm"
)

// openStore opens dsn for the checks of a test, closed when it ends.
func openStore(t *testing.T, dsn string) *gorm.DB {
	t.Helper()
	db, err := store.Open(t.Context(), dsn, store.Config{})
	if err != nil {
		t.Fatalf("open %s: %v", dsn, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db.Gorm
}

// waitRecovered waits until no idempotency record is in_progress or
// unknown: the recovery worker resolved what the killed attempts left.
func waitRecovered(t *testing.T, db *gorm.DB, within time.Duration) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		var n int64
		err := db.Table(idempotencyTable).Where("state IN ?", []string{"in_progress", "unknown"}).Count(&n).Error
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d records still in_progress or unknown after %s (%v)", n, within, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// chargedNotRecorded counts pending payments whose provider charge exists:
// a process killed now dies between the charge and its recording.
func chargedNotRecorded(db *gorm.DB) int64 {
	var n int64
	_ = db.Table("payments p").Joins("JOIN sandbox_charges c ON c.tenant_id = p.tenant_id AND c.downstream_key = p.downstream_key").
		Where("p.status = ?", "pending").Count(&n).Error
	return n
}

// TestFaultAPIKilled SIGKILLs the demo binary at random points under load
// and restarts it on the same address. Payments pause 100ms between the
// provider's charge and its recording (-pause-at after_charge=100ms), so
// many kills land in that window. Clients retry every operation with its
// key or ID until a final answer; other clients send payments once and give
// up. Expect: no duplicate charge, every 201 backed by a committed row, and,
// once the recovery worker ran, no record left in_progress or unknown and
// every charge recorded by its payment. On each server configured
// (PostgreSQL, MariaDB).
func TestFaultAPIKilled(t *testing.T) {
	t.Parallel()
	servers := testdb.Servers(t)
	bin := demoproc.Build(t)
	for _, server := range servers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			apiKilled(t, bin, testdb.New(t, server))
		})
	}
}

// apiKilled is TestFaultAPIKilled on the database dsn.
func apiKilled(t *testing.T, bin, dsn string) {
	n := faultScale(150, 600)
	proc := demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn,
		Args: append([]string{"-lease", "2s", "-recovery-interval", "200ms", "-pause-at", "after_charge=100ms"}, keepEvents...)})
	base := proc.URL()
	db := openStore(t, dsn)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	w := newWorkload(n, "kill", 3)
	client := &http.Client{Timeout: 10 * time.Second}
	tally := &faultTally{}

	loadDone := make(chan struct{})
	var kills, inWindow int
	var killer sync.WaitGroup
	killer.Go(func() {
		rng := rand.New(rand.NewPCG(7, 7))
		for {
			select {
			case <-loadDone:
				return
			case <-time.After(time.Duration(150+rng.IntN(450)) * time.Millisecond):
			}
			proc.Kill()
			kills++
			if chargedNotRecorded(db) > 0 {
				inWindow++
			}
			time.Sleep(time.Duration(rng.IntN(200)) * time.Millisecond)
			proc.Restart()
		}
	})

	// Abandoned payments of another tenant: sent once, never retried.
	var (
		abandonedMu    sync.Mutex
		abandonedAcked []response
		abandonedSent  int
		abandon        sync.WaitGroup
	)
	abandon.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-loadDone:
				return
			case <-time.After(30 * time.Millisecond):
			}
			op := faultOp{Method: http.MethodPost, Path: "/v1/payments", Token: tokenGlobex,
				Key: fmt.Sprintf("kill-abandoned-%d", i), Body: paymentBody(700+i, "pm_card_visa")}
			r, err := op.send(ctx, client, base)
			tally.add(r.Status, err)
			abandonedMu.Lock()
			abandonedSent++
			if err == nil && r.Status == http.StatusCreated {
				abandonedAcked = append(abandonedAcked, r)
			}
			abandonedMu.Unlock()
		}
	})

	finals := runOps(ctx, t, w.ops, 8, client, tally, base)
	close(loadDone)
	killer.Wait()
	abandon.Wait()

	w.wantFinals(t, finals)
	// A restarted binary answers 503 (Retry-After) until it is connected;
	// nothing answers any other 5xx.
	if got := tally.count(500, 502) + tally.count(504, 599); got != 0 {
		t.Fatalf("5xx answers other than 503: %d (%s)", got, tally)
	}
	if inWindow == 0 {
		t.Fatalf("none of %d SIGKILLs landed between a charge and its recording", kills)
	}
	waitRecovered(t, db, 30*time.Second)
	w.wantEffects(t, db, finals)

	// The abandoned payments: each 201 is committed, and every charge the
	// provider made is recorded by exactly one succeeded payment.
	var charges, recorded int64
	if err := db.Table("sandbox_charges").Where("tenant_id = ? AND status = ?", "globex", "succeeded").Count(&charges).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Table("payments p").Joins("JOIN sandbox_charges c ON c.tenant_id = p.tenant_id AND c.id = p.provider_charge_id").
		Where("p.tenant_id = ? AND p.status = ?", "globex", "succeeded").Count(&recorded).Error; err != nil {
		t.Fatal(err)
	}
	if charges != recorded {
		t.Fatalf("abandoned payments: %d charges, %d recorded by a succeeded payment", charges, recorded)
	}
	for _, r := range abandonedAcked {
		var got int64
		id, _ := r.JSON(t)["id"].(string)
		if err := db.Table("payments").Where("tenant_id = ? AND id = ? AND status = ?", "globex", id, "succeeded").Count(&got).Error; err != nil || got != 1 {
			t.Fatalf("acknowledged payment %s is not committed (%v)", id, err)
		}
	}
	t.Logf("API killed: %d operations retried to the end + %d sent once (%d acknowledged, %d charged); %d SIGKILLs (%d with a charge made and not yet recorded); 0 duplicates, 0 lost, 0 stuck; %s",
		n, abandonedSent, len(abandonedAcked), charges, kills, inWindow, tally)
}
