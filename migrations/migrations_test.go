package migrations_test

import (
	"context"
	"slices"
	"testing"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

// TestUpCreatesOnlyTheFrameworksTables: migrations.Up alone, as an
// application calls it, creates the framework's tables and none of the
// demo's or the example resources', and a second call changes nothing.
func TestUpCreatesOnlyTheFrameworksTables(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		for range 2 {
			if err := migrations.Up(ctx, db); err != nil {
				t.Fatal(err)
			}
		}
		tables, err := db.Gorm.Migrator().GetTables()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"idempotency_records", migrations.VersionTable} {
			if !slices.Contains(tables, want) {
				t.Fatalf("tables %v lack %s", tables, want)
			}
		}
		for _, demo := range []string{"orders", "order_items", "payments", "sandbox_charges", "transfers", "accounts"} {
			if slices.Contains(tables, demo) {
				t.Fatalf("migrations.Up created the demo table %s (tables %v)", demo, tables)
			}
		}
	})
}

// TestStatusReadsAndChangesNothing: on an empty database every migration
// is pending and Status creates no table (not even goose's version table);
// after Up every one is applied.
func TestStatusReadsAndChangesNothing(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		status := func(wantApplied bool) {
			t.Helper()
			list, err := migrations.Status(ctx, db)
			if err != nil || len(list) < 4 {
				t.Fatalf("Status = %+v, %v", list, err)
			}
			for i, m := range list {
				if m.Applied != wantApplied || m.Version != int64(i+1) || m.Name == "" || m.AppliedAt.IsZero() == wantApplied {
					t.Fatalf("migration %+v, want applied %v", m, wantApplied)
				}
			}
		}
		status(false)
		if tables, err := db.Gorm.Migrator().GetTables(); err != nil || len(tables) != 0 {
			t.Fatalf("tables %v after Status (%v), want none", tables, err)
		}
		if err := migrations.Up(ctx, db); err != nil {
			t.Fatal(err)
		}
		status(true)
	})
}
