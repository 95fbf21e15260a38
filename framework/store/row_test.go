package store_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"
	"path/filepath"
	"testing"

	"github.com/retrysafe/retrysafe/framework/store"
)

// brokenConns is a RowQuerier whose connection is always found broken
// before the statement goes out.
type brokenConns struct{ calls *int }

func (b brokenConns) QueryRow(context.Context, *sql.DB, string, []any, func([]string) []any) (bool, error) {
	*b.calls++
	return false, fmt.Errorf("%w: the connection was closed", driver.ErrBadConn)
}

// TestQueryRowFallsBackWhenNothingRan: a driver's own row read that found
// its connection broken (nothing ran) is followed by the same read through
// database/sql, on the pool and not on a transaction's connection, which
// database/sql runs itself; a read of no row reports none.
func TestQueryRowFallsBackWhenNothingRan(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "rows.db"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Gorm.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Exec("INSERT INTO kv VALUES ('a', 7)").Error; err != nil {
		t.Fatal(err)
	}
	calls := 0
	drv := brokenConns{&calls}
	for _, tc := range []struct {
		key   string
		found bool
	}{{"a", true}, {"b", false}} {
		var k string
		var v int
		var names []string
		found, err := store.QueryRow(ctx, drv, db.SQL(), "SELECT k, v FROM kv WHERE k = ?", []any{tc.key}, func(columns []string) []any {
			names = columns
			return []any{&k, &v}
		})
		if err != nil || found != tc.found {
			t.Fatalf("read of %q: found %v, %v; want found %v", tc.key, found, err, tc.found)
		}
		if tc.found && (k != "a" || v != 7 || fmt.Sprint(names) != "[k v]") {
			t.Fatalf("read %q = %d, columns %v", k, v, names)
		}
	}
	if calls != 2 {
		t.Fatalf("the driver's read ran %d times, want 2", calls)
	}
	tx, err := db.SQL().BeginTx(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	var v int
	if found, err := store.QueryRow(ctx, drv, tx, "SELECT v FROM kv WHERE k = 'a'", nil, func([]string) []any { return []any{&v} }); err != nil || !found || v != 7 {
		t.Fatalf("read in a transaction: %v %v %d", found, err, v)
	}
	if calls != 2 {
		t.Fatalf("the driver's read ran on a transaction's connection")
	}
}
