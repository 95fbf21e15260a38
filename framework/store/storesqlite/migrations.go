package storesqlite

import (
	"embed"
	"io/fs"

	"github.com/retrysafe/retrysafe/framework/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the framework's tables on SQLite (migrations/),
// applied in transactions, without a lock: the database serves one
// process, which migrates it at start.
func (Driver) Migrations() store.Migrations {
	files, _ := fs.Sub(migrationFiles, "migrations")
	return store.Migrations{Files: files, Dialect: "sqlite3", TransactionalDDL: true}
}
