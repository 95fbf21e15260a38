package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func TestOpenRejectsUnknownDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"", "mysql://x", "sqlite:"} {
		if _, err := store.Open(context.Background(), dsn, store.Config{}); !errors.Is(err, store.ErrUnknownDSN) {
			t.Fatalf("Open(%q) = %v, want ErrUnknownDSN", dsn, err)
		}
	}
}

func TestOpenUnreachablePostgresIsUnavailable(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", store.Config{})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a closed port = %v, want ErrUnavailable", err)
	}
}

// TestDialectContract is what every dialect must do: a row lock held by
// one transaction makes a second writer fail with ErrLockTimeout after the
// lock timeout, not wait forever and not succeed; Write commits on nil and
// rolls back on error.
func TestDialectContract(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{LockTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Gorm.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv VALUES ('a', 1)").Error }); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if err := db.Write(ctx, func(tx *gorm.DB) error {
			if err := tx.Exec("UPDATE kv SET v = 2").Error; err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("Write = %v, want boom", err)
		}

		locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- db.Write(ctx, func(tx *gorm.DB) error {
				var v int
				if err := db.Dialect.LockRow(tx.Table("kv").Select("v").Where("k = ?", "a")).Scan(&v).Error; err != nil {
					return err
				}
				close(locked)
				<-release
				return nil
			})
		}()
		<-locked
		start := time.Now()
		err = db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("UPDATE kv SET v = v + 10 WHERE k = 'a'").Error })
		waited := time.Since(start)
		close(release)
		if herr := <-done; herr != nil {
			t.Fatal(herr)
		}
		if !errors.Is(err, store.ErrLockTimeout) {
			t.Fatalf("second writer = %v, want ErrLockTimeout", err)
		}
		if waited > 5*time.Second {
			t.Fatalf("second writer waited %v, far past the lock timeout", waited)
		}
		var v int
		if err := db.Gorm.Raw("SELECT v FROM kv WHERE k = 'a'").Scan(&v).Error; err != nil || v != 1 {
			t.Fatalf("v = %d (%v), want 1: the rollback and the timed-out write left no trace", v, err)
		}
	})
}
