package storepg

import (
	"embed"
	"io/fs"

	"github.com/pressly/goose/v3/lock"

	"github.com/retrysafe/retrysafe/framework/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the framework's tables on PostgreSQL (migrations/),
// applied in transactions, concurrent migrators taking turns on an
// advisory lock of their version table.
func (Driver) Migrations() store.Migrations {
	files, _ := fs.Sub(migrationFiles, "migrations")
	return store.Migrations{Files: files, Dialect: "postgres", TransactionalDDL: true, Lock: advisoryLock}
}

// advisoryLock is goose's session lock on PostgreSQL, an advisory lock
// derived from the version table, so that the framework's and an
// application's migrations do not wait for each other.
func advisoryLock(versionTable string) (store.MigrationLock, error) {
	return lock.NewPostgresSessionLocker(lock.WithLockID(lockID(versionTable)))
}

// lockID derives the advisory lock of one version table.
func lockID(versionTable string) int64 {
	var h int64 = 5381
	for i := 0; i < len(versionTable); i++ {
		h = h*33 + int64(versionTable[i])
	}
	return h & 0x7fffffffffff
}
