package schema

import (
	"context"
	"embed"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/migrations"
)

// VersionTable is the goose version table of these migrations.
const VersionTable = "retrysafe_examples_schema_version"

//go:embed postgres/*.sql sqlite/*.sql mysql/*.sql
var files embed.FS

// Up applies the framework's migrations and then the example resources'
// tables, the folder of db's driver (store.Driver.Name).
func Up(ctx context.Context, db *store.DB) error {
	if err := migrations.Up(ctx, db); err != nil {
		return err
	}
	return migrations.Apply(ctx, db, files, VersionTable)
}
