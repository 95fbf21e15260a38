package store_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// ownGorm opens a *gorm.DB the way an application does, with none of the
// framework's DSN settings: no busy timeout, no _txlock, no lock_timeout.
func ownGorm(t testing.TB, dialect string, pragmas ...string) *gorm.DB {
	t.Helper()
	var dialector gorm.Dialector
	if dialect == "sqlite" {
		dialector = sqlite.Open("file:" + filepath.Join(t.TempDir(), "app.db") + "?" + url.Values{"_pragma": pragmas}.Encode())
	} else {
		dialector = postgres.Open(testdb.New(t, dialect))
	}
	gdb, err := gorm.Open(dialector, &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if sqlDB, err := gdb.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return gdb
}

func TestNewRequiresWALOnSQLite(t *testing.T) {
	t.Parallel()
	_, err := store.New(context.Background(), ownGorm(t, "sqlite"), store.Config{})
	if !errors.Is(err, store.ErrMisconfigured) {
		t.Fatalf("New on a rollback-journal SQLite = %v, want ErrMisconfigured", err)
	}
	if _, err := store.New(context.Background(), ownGorm(t, "sqlite", "journal_mode(WAL)"), store.Config{}); err != nil {
		t.Fatalf("New on a WAL SQLite: %v", err)
	}
}

// TestWriteOnOwnGormDB: on the application's own handle, Write applies the
// lock timeout per transaction (a second writer times out, it does not
// wait for ever or fail at once), leaves nothing on the pooled connection
// afterwards, nests gorm transactions as savepoints, and rolls back on an
// error or a panic.
func TestWriteOnOwnGormDB(t *testing.T) {
	t.Parallel()
	for _, dialect := range testdb.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			gdb := ownGorm(t, dialect, "journal_mode(WAL)")
			db, err := store.New(ctx, gdb, store.Config{LockTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			if db.Dialect.Name() != dialect {
				t.Fatalf("dialect %s, want %s", db.Dialect.Name(), dialect)
			}
			if err := gdb.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
				t.Fatal(err)
			}
			type kv struct {
				K string `gorm:"primaryKey"`
				V int
			}
			// gorm's own default transaction and a nested Transaction
			// inside Write: one commit, the inner failure rolled back to
			// its savepoint.
			if err := db.Write(ctx, func(tx *gorm.DB) error {
				if err := tx.Table("kv").Create(&kv{K: "a", V: 1}).Error; err != nil {
					return err
				}
				inner := tx.Transaction(func(tx *gorm.DB) error {
					if err := tx.Table("kv").Create(&kv{K: "b", V: 2}).Error; err != nil {
						return err
					}
					return errors.New("inner fails")
				})
				if inner == nil {
					return errors.New("the inner transaction did not fail")
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			var n int64
			if err := gdb.Table("kv").Count(&n).Error; err != nil || n != 1 {
				t.Fatalf("rows = %d (%v), want 1: the savepoint's row rolled back", n, err)
			}
			func() {
				defer func() {
					if recover() == nil {
						t.Fatal("the panic was swallowed")
					}
				}()
				_ = db.Write(ctx, func(tx *gorm.DB) error {
					tx.Exec("UPDATE kv SET v = 99")
					panic("boom")
				})
			}()
			var v int
			if err := gdb.Raw("SELECT v FROM kv WHERE k = 'a'").Scan(&v).Error; err != nil || v != 1 {
				t.Fatalf("v = %d (%v) after a panic, want 1", v, err)
			}
			if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Commit().Error }); err == nil {
				t.Fatal("fn committed Write's transaction itself")
			}

			held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
			go func() {
				done <- db.Write(ctx, func(tx *gorm.DB) error {
					if err := tx.Exec("UPDATE kv SET v = 2 WHERE k = 'a'").Error; err != nil {
						return err
					}
					close(held)
					<-release
					return nil
				})
			}()
			<-held
			start := time.Now()
			err = db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("UPDATE kv SET v = 3 WHERE k = 'a'").Error })
			waited := time.Since(start)
			close(release)
			if herr := <-done; herr != nil {
				t.Fatal(herr)
			}
			if !errors.Is(err, store.ErrLockTimeout) || waited < 100*time.Millisecond || waited > 5*time.Second {
				t.Fatalf("second writer = %v after %v, want ErrLockTimeout after about 200ms", err, waited)
			}
			if dialect == "postgres" {
				// SET LOCAL ended with the transaction: the pool's
				// connections keep the server's default.
				sqlDB, _ := gdb.DB()
				sqlDB.SetMaxOpenConns(1)
				var lt string
				if err := gdb.Raw("SHOW lock_timeout").Scan(&lt).Error; err != nil || lt != "0" {
					t.Fatalf("lock_timeout outside Write = %q (%v), want the default 0", lt, err)
				}
			}
		})
	}
}
