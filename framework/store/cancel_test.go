package store_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestWriteUnderCancellationCommitsWhatItAcknowledges ends the context of
// many writes at random points: before, during and after fn, around COMMIT.
// Every Write that returned nil must have committed its row, and the pool
// must stay usable (no transaction left open on a pooled connection). On
// SQLite, whose COMMIT runs to its end, nothing else commits; on
// PostgreSQL a COMMIT cut by the context is ambiguous (the server may have
// committed), so Write reports an error (503, retried with the same key or
// ID) for a row that may exist.
func TestWriteUnderCancellationCommitsWhatItAcknowledges(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{LockTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := db.Gorm.Exec("CREATE TABLE acked (v INTEGER NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		acked := map[int64]bool{}
		n := 600 // PostgreSQL: a network round trip each
		if db.Dialect.Name() == "sqlite" {
			n = 20000
		}
		for i := range n {
			wctx, cancel := context.WithCancel(ctx)
			inFn := i%3 == 0
			if !inFn {
				time.AfterFunc(time.Duration(rand.IntN(400))*time.Microsecond, cancel)
			}
			err := db.Write(wctx, func(tx *gorm.DB) error {
				if err := tx.Exec("INSERT INTO acked (v) VALUES (?)", i).Error; err != nil {
					return err
				}
				if inFn {
					cancel() // the client goes away after the last statement
				}
				return nil
			})
			cancel()
			if err == nil {
				acked[int64(i)] = true
			}
		}
		// The pool is clean: an ordinary write succeeds on it.
		for range 8 {
			if err := db.Write(ctx, func(tx *gorm.DB) error { return nil }); err != nil {
				t.Fatalf("a write after the cancelled ones: %v", err)
			}
		}
		var committed []int64
		if err := db.Gorm.Table("acked").Pluck("v", &committed).Error; err != nil {
			t.Fatal(err)
		}
		stored := map[int64]bool{}
		for _, v := range committed {
			stored[v] = true
		}
		for v := range acked {
			if !stored[v] {
				t.Fatalf("write %d was acknowledged but is not committed", v)
			}
		}
		if db.Dialect.Name() == "sqlite" && len(committed) != len(acked) {
			t.Fatalf("%d rows committed for %d acknowledged writes", len(committed), len(acked))
		}
		t.Logf("%d of %d writes acknowledged, %d committed", len(acked), n, len(committed))
	})
}
