package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

// frameworkVersions is the goose version table of the framework's own
// migrations (migrations.VersionTable).
const frameworkVersions = "retrysafe_schema_version"

// migrate applies the driver's migrations, the framework's tables, on db.
func migrate(t *testing.T, db *store.DB) {
	t.Helper()
	if err := db.Migrate(context.Background(), db.Driver.Migrations().Files, frameworkVersions); err != nil {
		t.Fatal(err)
	}
}

// testMigrations: the driver's migrations ([store.Driver.Migrations])
// read as all pending on an empty database, without creating anything;
// two processes applying them at once take turns on the driver's lock and
// both succeed (one after the other where the driver has no lock); then
// every one reads as applied, the framework's tables are there, and
// applying them again changes nothing. A store whose pool has one
// connection migrates as well.
func testMigrations(t *testing.T, h Harness) {
	ctx := context.Background()
	db := open(t, h, store.Config{})
	files := db.Driver.Migrations().Files
	status := func(applied bool) {
		t.Helper()
		list, err := db.MigrationStatus(ctx, files, frameworkVersions)
		if err != nil || len(list) < 5 {
			t.Fatalf("MigrationStatus = %+v, %v", list, err)
		}
		for i, m := range list {
			if m.Applied != applied || m.Version != int64(i+1) || m.Name == "" || m.AppliedAt.IsZero() == applied {
				t.Fatalf("migration %+v, want applied %v", m, applied)
			}
		}
	}
	status(false)
	if db.Gorm.Migrator().HasTable(frameworkVersions) {
		t.Fatal("MigrationStatus created the version table")
	}
	done := make(chan error, 2)
	for range 2 {
		if db.Driver.Migrations().Lock == nil {
			done <- db.Migrate(ctx, files, frameworkVersions)
			continue
		}
		go func() { done <- db.Migrate(ctx, files, frameworkVersions) }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	status(true)
	for _, table := range []string{"idempotency_records", "idempotency_resolutions", "idempotency_operations",
		"outbox_events", "outbox_sequences", "outbox_published", "inbox_messages"} {
		if !db.Gorm.Migrator().HasTable(table) {
			t.Fatalf("no table %s after the migrations", table)
		}
	}
	migrate(t, db)
	status(true)

	// A pool of one connection migrates too: nothing waits for a second
	// connection while the first holds the migrations' lock.
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	one := open(t, h, store.Config{MaxOpenConns: 1})
	if err := one.Migrate(ctx, files, frameworkVersions); err != nil {
		t.Fatalf("migrations on a pool of one connection: %v", err)
	}
}
