// Package migrations applies the framework's own tables (the POST
// fallback's idempotency records, its operators' resolutions and its
// operations' published codes; the outbox and the consumer inbox) and an
// application's own, on a store's database.
//
// [Up] applies the framework's tables and nothing else: an application
// calls it at start-up next to its own migrations and gets no demo or
// example table. Their files are the driver's (each driver package under
// framework/store carries its database's, store.Driver.Migrations), and
// their versions are kept in their own goose table ([VersionTable]), so
// they never mix with the application's.
//
// [Apply] is the same machinery for an application's own embedded source,
// one folder per database named after its driver (postgres/, sqlite/,
// mysql/: store.Driver.Name), as the example resources' tables in
// resources/schema are. Up and Apply are idempotent: every process may
// call them at start, and concurrent starts take turns on the driver's
// lock (an advisory lock on PostgreSQL, GET_LOCK on the MySQL family).
// [Status] reads which of the framework's migrations are applied and
// changes nothing (the retrysafe command's "migrate status"). Nothing
// here depends on which database the store is on: what differs (goose's
// dialect, the lock, whether DDL is transactional) the driver declares,
// and [store.DB.Migrate] runs goose with it.
//
// A new migration is a file per driver with the same number, so that
// every store always has the same tables. Where DDL is not transactional
// (the MySQL family) each statement of a migration must be safe to run
// again after a crash half-way (IF NOT EXISTS, IF EXISTS), as its first
// file says.
package migrations

import (
	"context"
	"fmt"
	"io/fs"

	"github.com/retrysafe/retrysafe/framework/store"
)

// VersionTable is the goose version table of the framework's migrations.
const VersionTable = "retrysafe_schema_version"

// Up applies every pending framework migration on db's database.
func Up(ctx context.Context, db *store.DB) error {
	if err := db.Migrate(ctx, db.Driver.Migrations().Files, VersionTable); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// Apply applies every pending migration of source on db's database: the
// files of source's folder named after db's driver (store.Driver.Name:
// "postgres/", "sqlite/", "mysql/"), versioned in versionTable. Each
// migration source needs a version table of its own.
func Apply(ctx context.Context, db *store.DB, source fs.FS, versionTable string) error {
	files, err := fs.Sub(source, db.Driver.Name())
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if err := db.Migrate(ctx, files, versionTable); err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	return nil
}

// Status reads which framework migrations are applied on db's database,
// without changing anything: on a database that has none yet (no version
// table), every migration is pending.
func Status(ctx context.Context, db *store.DB) ([]store.Migration, error) {
	list, err := db.MigrationStatus(ctx, db.Driver.Migrations().Files, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return list, nil
}
