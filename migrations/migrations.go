// Package migrations holds the SQL schema of retrysafe, one folder per
// dialect (postgres/, sqlite/), embedded in the binary and applied by goose.
//
// [Up] is idempotent: every process calls it at start, and concurrent starts
// against one PostgreSQL database take turns on an advisory lock.
//
// A new migration is a pair of files with the same number, one per dialect,
// so that both stores always have the same tables.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
)

//go:embed postgres/*.sql sqlite/*.sql
var files embed.FS

// Up applies every pending migration for dialect ("postgres" or "sqlite").
func Up(ctx context.Context, db *sql.DB, dialect string) error {
	var (
		gooseDialect goose.Dialect
		opts         []goose.ProviderOption
	)
	switch dialect {
	case "postgres":
		gooseDialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case "sqlite":
		gooseDialect = goose.DialectSQLite3
	default:
		return fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	fsys, err := fs.Sub(files, dialect)
	if err != nil {
		return err
	}
	opts = append(opts, goose.WithDisableGlobalRegistry(true))
	provider, err := goose.NewProvider(gooseDialect, db, fsys, opts...)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up: %w", err)
	}
	return nil
}
