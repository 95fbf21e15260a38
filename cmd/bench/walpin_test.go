package main

import (
	"context"
	"testing"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestABulkLoadIsNotPinned: the run's WAL pin (a temporary replication
// slot) is gone while a bulk load runs, so that a checkpoint during the
// load may remove the WAL the load wrote, and it is back after the load
// (reserving from the last checkpoint, which followed the load) for the
// measured ranges that follow.
func TestABulkLoadIsNotPinned(t *testing.T) {
	ctx := context.Background()
	d, err := openDatabase(ctx, testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	if d.slot == nil {
		t.Skip("the role may not create a replication slot: the WAL is not pinned at all")
	}
	slot := func() (restart string, ok bool) {
		err := d.admin.QueryRowContext(ctx, "SELECT restart_lsn::text FROM pg_replication_slots WHERE slot_name = $1", d.name).Scan(&restart)
		return restart, err == nil
	}
	before, ok := slot()
	if !ok {
		t.Fatal("no slot before the load")
	}
	bulk, err := bulkDB(d)
	if err != nil {
		t.Fatal(err)
	}
	defer bulk.Close()
	if _, err := bulk.ExecContext(ctx, "CREATE TABLE walpin (k int, v text)"); err != nil {
		t.Fatal(err)
	}
	var loadEnd string
	err = d.unpinned(ctx, func() error {
		if _, ok := slot(); ok {
			t.Error("the slot is still there during the load")
		}
		row := func(i int) []any { return []any{i, "row"} }
		if err := bulkInsert(ctx, bulk, d.Dialect, "walpin", []string{"k", "v"}, 2000, row); err != nil {
			return err
		}
		if err := d.admin.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&loadEnd); err != nil {
			return err
		}
		// A checkpoint during a long load may now remove its WAL.
		_, err := d.admin.ExecContext(ctx, "CHECKPOINT")
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	after, ok := slot()
	if !ok {
		t.Fatal("no slot after the load")
	}
	var later bool
	if err := d.admin.QueryRowContext(ctx, "SELECT $1::pg_lsn >= $2::pg_lsn AND $1::pg_lsn > $3::pg_lsn", after, loadEnd, before).Scan(&later); err != nil {
		t.Fatal(err)
	}
	if !later {
		t.Fatalf("the slot after the load holds WAL from %s; the load ended at %s (slot before: %s)", after, loadEnd, before)
	}
}
