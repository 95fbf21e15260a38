package inbox_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/inbox"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

// setup opens a migrated database with an effects table the consumer
// writes to.
func setup(t *testing.T, dsn string) (*store.DB, *inbox.Inbox, *time.Time) {
	t.Helper()
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, store.Config{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Exec("CREATE TABLE effects (message_id TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC()
	in, err := inbox.New(db, inbox.Config{Now: func() time.Time { return now }, Retention: time.Hour, CleanupBatchSize: 2})
	if err != nil {
		t.Fatal(err)
	}
	return db, in, &now
}

func effect(id string) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error { return tx.Exec("INSERT INTO effects (message_id) VALUES (?)", id).Error }
}

func count(t *testing.T, db *store.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

func TestProcessAppliesAMessageOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db, in, _ := setup(t, dsn)
		ctx := context.Background()
		dup, err := in.Process(ctx, "ledger", "m1", effect("m1"))
		if err != nil || dup {
			t.Fatalf("first: dup %v err %v", dup, err)
		}
		dup, err = in.Process(ctx, "ledger", "m1", effect("m1"))
		if err != nil || !dup {
			t.Fatalf("again: dup %v err %v", dup, err)
		}
		// Another consumer has its own record of the message.
		if dup, err := in.Process(ctx, "audit", "m1", func(*gorm.DB) error { return nil }); err != nil || dup {
			t.Fatalf("other consumer: dup %v err %v", dup, err)
		}
		var wg sync.WaitGroup
		results := make(chan error, 10)
		applied := make(chan bool, 10)
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				dup, err := in.Process(ctx, "ledger", "m2", effect("m2"))
				results <- err
				applied <- err == nil && !dup
			}()
		}
		wg.Wait()
		close(results)
		close(applied)
		for err := range results {
			if err != nil {
				t.Fatalf("concurrent: %v", err)
			}
		}
		n := 0
		for a := range applied {
			if a {
				n++
			}
		}
		if n != 1 || count(t, db, "effects") != 2 {
			t.Fatalf("applied %d times, effects %d; want 1 and 2", n, count(t, db, "effects"))
		}
	})
}

func TestProcessFailureRollsBackBoth(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db, in, _ := setup(t, dsn)
		ctx := context.Background()
		boom := errors.New("boom")
		_, err := in.Process(ctx, "ledger", "m1", func(tx *gorm.DB) error {
			if err := effect("m1")(tx); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) || count(t, db, "effects") != 0 || count(t, db, "inbox_messages") != 0 {
			t.Fatalf("err %v, effects %d, inbox %d", err, count(t, db, "effects"), count(t, db, "inbox_messages"))
		}
		// The redelivery applies it.
		if dup, err := in.Process(ctx, "ledger", "m1", effect("m1")); err != nil || dup || count(t, db, "effects") != 1 {
			t.Fatalf("redelivery: dup %v err %v", dup, err)
		}
	})
}

func TestCleanupDeletesOldRowsInBatches(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db, in, now := setup(t, dsn)
		ctx := context.Background()
		for _, id := range []string{"a", "b", "c"} {
			if _, err := in.Process(ctx, "ledger", id, effect(id)); err != nil {
				t.Fatal(err)
			}
		}
		if n, err := in.CleanupOnce(ctx); err != nil || n != 0 {
			t.Fatalf("within retention: %d %v", n, err)
		}
		*now = now.Add(2 * time.Hour)
		if n, err := in.CleanupOnce(ctx); err != nil || n != 3 || count(t, db, "inbox_messages") != 0 {
			t.Fatalf("cleanup: %d %v", n, err)
		}
	})
}
