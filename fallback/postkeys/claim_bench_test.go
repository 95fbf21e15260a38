package postkeys

import (
	"context"
	"strconv"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

// claimBench is an adapter on a fresh database of dialect, for the claim
// benchmarks: the record statements alone, without HTTP or an operation.
func claimBench(b *testing.B, dialect string) *Adapter {
	b.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(b, dialect), store.Config{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db); err != nil {
		b.Fatal(err)
	}
	e, err := framework.NewEngine(db, framework.EngineConfig{})
	if err != nil {
		b.Fatal(err)
	}
	a, err := New(e, Config{})
	if err != nil {
		b.Fatal(err)
	}
	return a
}

func (a *Adapter) benchClaim(b *testing.B, key string, wantClaimed bool) {
	at := &attempt{a: a, id: store.RecordKey{Tenant: "acme", Operation: "bench", Key: key}, fingerprint: "v1:" + key}
	ctx := context.Background()
	err := a.db.Write(ctx, func(tx *gorm.DB) error {
		_, claimed, _, err := a.claimTx(ctx, tx, at, framework.FingerprintVersion)
		if err == nil && claimed != wantClaimed {
			b.Fatalf("claimed = %v, want %v", claimed, wantClaimed)
		}
		return err
	})
	if err != nil {
		b.Fatal(err)
	}
}

// BenchmarkClaim measures the claim of a free key (one INSERT … ON
// CONFLICT DO NOTHING) in its own transaction.
func BenchmarkClaim(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			a := claimBench(b, dialect)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				a.benchClaim(b, "k"+strconv.Itoa(i), true)
			}
		})
	}
}

// BenchmarkClaimHeld measures the claim of a key whose record is live (the
// replay's way in): the insert does nothing and the record is read.
func BenchmarkClaimHeld(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			a := claimBench(b, dialect)
			a.benchClaim(b, "held", true)
			b.ReportAllocs()
			for b.Loop() {
				a.benchClaim(b, "held", false)
			}
		})
	}
}
