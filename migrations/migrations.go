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
