package storesqlite_test

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"testing"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// ownGorm opens a *gorm.DB the way an application does
// (github.com/glebarez/sqlite), with none of the framework's DSN settings
// (no busy timeout, no _txlock), only the pragmas given.
func ownGorm(tb testing.TB, pragmas ...string) *gorm.DB {
	tb.Helper()
	gdb, err := gorm.Open(sqlite.Open("file:"+filepath.Join(tb.TempDir(), "app.db")+"?"+url.Values{"_pragma": pragmas}.Encode()), &gorm.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if sqlDB, err := gdb.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return gdb
}

func TestContract(t *testing.T) {
	t.Parallel()
	storetest.Exercise(t, storetest.Harness{
		Name:         "sqlite",
		DSN:          func(tb testing.TB) string { return testdb.New(tb, "sqlite") },
		Gorm:         func(tb testing.TB) *gorm.DB { return ownGorm(tb, "journal_mode(WAL)") },
		Embedded:     true,
		RefusedQuery: "SELECT json(?)", // malformed JSON
	})
}

// TestNewRequiresWAL: New refuses a database in a rollback-journal mode,
// where a reader blocks the writer.
func TestNewRequiresWAL(t *testing.T) {
	t.Parallel()
	_, err := store.New(context.Background(), ownGorm(t), store.Config{})
	if !errors.Is(err, store.ErrMisconfigured) {
		t.Fatalf("New on a rollback-journal SQLite = %v, want ErrMisconfigured", err)
	}
	if _, err := store.New(context.Background(), ownGorm(t, "journal_mode(WAL)"), store.Config{}); err != nil {
		t.Fatalf("New on a WAL SQLite: %v", err)
	}
}
