package storepg_test

import (
	"context"
	"errors"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestReadOnlyServer: a pooled connection whose server turns read-only
// (here the session's default_transaction_read_only, as a primary fenced
// for a switchover reports it) fails a write with ErrUnavailable (503),
// not an internal error; with target_session_attrs=read-write the pool
// drops that connection, and the next write runs on a new one.
func TestReadOnlyServer(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t, "postgres") // skips without TEST_DATABASE_URL
	ctx := context.Background()
	insert := func(db *store.DB) error {
		return db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv VALUES (1)").Error })
	}
	open := func(t *testing.T, dsn string) *store.DB {
		db, err := store.Open(ctx, dsn, store.Config{MaxOpenConns: 1})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := db.Gorm.Exec("CREATE TABLE IF NOT EXISTS kv (n int)").Error; err != nil {
			t.Fatal(err)
		}
		// The pool's only connection turns read-only.
		if err := db.Gorm.Exec("SET default_transaction_read_only = on").Error; err != nil {
			t.Fatal(err)
		}
		return db
	}
	t.Run("unavailable", func(t *testing.T) {
		db := open(t, dsn)
		if err := insert(db); !errors.Is(err, store.ErrUnavailable) {
			t.Fatalf("write on a read-only connection = %v, want ErrUnavailable", err)
		}
	})
	t.Run("dropped with target_session_attrs=read-write", func(t *testing.T) {
		db := open(t, dsn+"&target_session_attrs=read-write")
		if err := insert(db); err != nil {
			t.Fatalf("write after the connection turned read-only = %v, want it on a new connection", err)
		}
	})
}
