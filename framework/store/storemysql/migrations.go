package storemysql

import (
	"context"
	"database/sql"
	"embed"
	"fmt"
	"io/fs"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

//go:embed migrations/*.sql
var migrationFiles embed.FS

// Migrations returns the framework's tables on the MySQL family
// (migrations/). DDL is not transactional there: each statement of its
// migrations is safe to run again after a crash half-way (IF NOT EXISTS,
// IF EXISTS), as their first file says, and concurrent migrators take
// turns on a named lock (GET_LOCK).
func (Driver) Migrations() store.Migrations {
	files, _ := fs.Sub(migrationFiles, "migrations")
	return store.Migrations{Files: files, Dialect: "mysql", Lock: func(versionTable string) (store.MigrationLock, error) {
		return namedLock{name: "retrysafe_migrations_" + versionTable}, nil
	}}
}

// namedLock is goose's session lock on the MySQL family: GET_LOCK, a lock
// named by the version table that the server holds for the session and
// drops when the session ends (a process that dies while migrating frees
// it).
type namedLock struct{ name string }

// namedLockWait is how long one process waits for another's migrations.
const namedLockWait = 5 * time.Minute

func (l namedLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, int(namedLockWait/time.Second)).Scan(&got); err != nil {
		return fmt.Errorf("storemysql: migrations lock %s: %w", l.name, err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("storemysql: migrations lock %s: not granted within %v", l.name, namedLockWait)
	}
	return nil
}

func (l namedLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released sql.NullInt64
	return conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", l.name).Scan(&released)
}
