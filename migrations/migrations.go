// Package migrations owns the framework's own tables (the POST fallback's
// idempotency records, its operators' resolutions and its operations'
// published codes; the outbox and the consumer inbox), one embedded goose
// source per dialect (postgres/, sqlite/, mysql/).
//
// [Up] applies them and nothing else: an application calls it at start-up
// next to its own migrations and gets no demo or example table. The
// framework's versions are kept in their own goose table
// ([VersionTable]), so they never mix with the application's.
//
// [Apply] is the same machinery for any other embedded source (the example
// resources' tables in resources/schema use it, and an application may too).
// Up and Apply are idempotent: every process may call them at start, and
// concurrent starts against one PostgreSQL database take turns on an
// advisory lock (on MySQL, a named lock: GET_LOCK). [Status] reads which of the framework's migrations are
// applied and changes nothing (the retrysafe command's "migrate status").
//
// A new migration is a file per dialect with the same number, so that
// every store always has the same tables. DDL is not transactional on
// MySQL: each statement of a mysql/ migration must be safe to run again
// after a crash half-way (IF NOT EXISTS, IF EXISTS), as its first file
// says. On MySQL goose's version table and its row of version 0 are
// written before goose runs, each on its own, so that a crash between the
// two (or a failed insert) never leaves a table goose refuses.
package migrations

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"github.com/pressly/goose/v3/lock"
)

// VersionTable is the goose version table of the framework's migrations.
const VersionTable = "retrysafe_schema_version"

//go:embed postgres/*.sql sqlite/*.sql mysql/*.sql
var files embed.FS

// Up applies every pending framework migration for dialect ("postgres",
// "sqlite" or "mysql") on db.
func Up(ctx context.Context, db *sql.DB, dialect string) error {
	return Apply(ctx, db, dialect, files, VersionTable)
}

// Apply applies every pending migration of source for dialect: the files of
// source's subfolder named after the dialect ("postgres/", "sqlite/", "mysql/"),
// versioned in versionTable. Each migration source needs a version table of
// its own.
func Apply(ctx context.Context, db *sql.DB, dialect string, source fs.FS, versionTable string) error {
	provider, err := newProvider(db, dialect, source, versionTable)
	if err != nil {
		return err
	}
	if dialect == "mysql" {
		if err := ensureVersionTable(ctx, db, versionTable); err != nil {
			return err
		}
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("migrations: up %s: %w", versionTable, err)
	}
	return nil
}

// newProvider is the goose provider of source's migrations for dialect,
// versioned in versionTable (taking turns on an advisory lock on
// PostgreSQL, a named lock on MySQL).
func newProvider(db *sql.DB, dialect string, source fs.FS, versionTable string) (*goose.Provider, error) {
	if versionTable == "" {
		return nil, fmt.Errorf("migrations: a version table name is required")
	}
	var (
		gooseDialect goose.Dialect
		opts         = []goose.ProviderOption{goose.WithDisableGlobalRegistry(true)}
	)
	switch dialect {
	case "postgres":
		gooseDialect = goose.DialectPostgres
		locker, err := lock.NewPostgresSessionLocker(lock.WithLockID(lockID(versionTable)))
		if err != nil {
			return nil, err
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	case "sqlite":
		gooseDialect = goose.DialectSQLite3
	case "mysql":
		gooseDialect = goose.DialectMySQL
		opts = append(opts, goose.WithSessionLocker(namedLock{name: lockName(versionTable)}))
	default:
		return nil, fmt.Errorf("migrations: unknown dialect %q", dialect)
	}
	fsys, err := fs.Sub(source, dialect)
	if err != nil {
		return nil, err
	}
	provider, err := goose.NewProvider(gooseDialect, db, fsys, append(opts, goose.WithTableName(versionTable))...)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	return provider, nil
}

// Migration is the state of one framework migration, as [Status] reads it.
type Migration struct {
	Version int64
	// Name is the migration's file name.
	Name    string
	Applied bool
	// AppliedAt is when it was applied (zero while pending).
	AppliedAt time.Time
}

// Status reads which framework migrations are applied on db, without
// changing anything: on a database that has none yet (no version table),
// every migration is pending.
func Status(ctx context.Context, db *sql.DB, dialect string) ([]Migration, error) {
	provider, err := newProvider(db, dialect, files, VersionTable)
	if err != nil {
		return nil, err
	}
	var (
		out   []Migration
		exist = true
	)
	storeDialect := map[string]database.Dialect{"postgres": database.DialectPostgres, "sqlite": database.DialectSQLite3,
		"mysql": database.DialectMySQL}[dialect]
	vs, err := database.NewStore(storeDialect, VersionTable)
	if err != nil {
		return nil, fmt.Errorf("migrations: %w", err)
	}
	if ext, ok := vs.(database.StoreExtender); ok {
		exist, err = ext.TableExists(ctx, db)
		if errors.Is(err, errors.ErrUnsupported) && dialect == "sqlite" {
			// goose asks PostgreSQL's catalog only.
			err = db.QueryRowContext(ctx, "SELECT count(*) > 0 FROM sqlite_master WHERE type = 'table' AND name = ?",
				VersionTable).Scan(&exist)
		}
		if err != nil {
			return nil, fmt.Errorf("migrations: status: %w", err)
		}
	}
	if !exist {
		for _, src := range provider.ListSources() {
			out = append(out, Migration{Version: src.Version, Name: filepath.Base(src.Path)})
		}
		return out, nil
	}
	status, err := provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("migrations: status: %w", err)
	}
	for _, st := range status {
		out = append(out, Migration{Version: st.Source.Version, Name: filepath.Base(st.Source.Path),
			Applied: st.State == goose.StateApplied, AppliedAt: st.AppliedAt})
	}
	return out, nil
}

// lockID derives the advisory lock of one version table, so that the
// framework's and an application's migrations do not wait for each other.
func lockID(versionTable string) int64 {
	var h int64 = 5381
	for i := 0; i < len(versionTable); i++ {
		h = h*33 + int64(versionTable[i])
	}
	return h & 0x7fffffffffff
}

// ensureVersionTable creates goose's version table on MySQL, and its row
// of version 0, unless they are there, under the migrations' named lock,
// before goose runs. goose would create both in one transaction, but on
// MySQL a CREATE TABLE commits by itself and is no part of one: a
// process stopped between the two left a table on which goose refuses
// every later Up ("missing zero version migration"); the same error
// ended two loaded test runs in a fresh database, most likely the insert
// failing in goose's transaction and goose's retry, finding the table,
// skipping it. Here each runs on its own, the insert retried, and a table
// found without its row gets the row.
func ensureVersionTable(ctx context.Context, db *sql.DB, versionTable string) (retErr error) {
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	l := namedLock{name: lockName(versionTable)}
	if err := l.SessionLock(ctx, conn); err != nil {
		return errors.Join(err, conn.Close())
	}
	defer func() {
		retErr = errors.Join(retErr, l.SessionUnlock(context.WithoutCancel(ctx), conn), conn.Close())
	}()
	vs, err := database.NewStore(database.DialectMySQL, versionTable)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	ext, ok := vs.(database.StoreExtender)
	if !ok {
		return fmt.Errorf("migrations: goose's MySQL store cannot tell whether %s exists", versionTable)
	}
	exists, err := ext.TableExists(ctx, conn)
	if err != nil {
		return fmt.Errorf("migrations: %w", err)
	}
	if !exists {
		if err := vs.CreateVersionTable(ctx, conn); err != nil {
			return fmt.Errorf("migrations: create %s: %w", versionTable, err)
		}
	}
	for attempt := 1; ; attempt++ {
		list, err := vs.ListMigrations(ctx, conn)
		if err == nil && len(list) > 0 {
			return nil
		}
		if err == nil {
			err = vs.Insert(ctx, conn, database.InsertRequest{Version: 0})
		}
		if err == nil || attempt == 3 {
			return wrapZeroVersion(err)
		}
		select {
		case <-ctx.Done():
			return wrapZeroVersion(errors.Join(err, ctx.Err()))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func wrapZeroVersion(err error) error {
	if err != nil {
		return fmt.Errorf("migrations: the version table's zero version: %w", err)
	}
	return nil
}

// lockName is the named lock of the migrations versioned in versionTable.
func lockName(versionTable string) string { return "retrysafe_migrations_" + versionTable }

// namedLock is goose's session lock on MySQL: GET_LOCK, a lock named by
// the version table that the server holds for the session and drops when
// the session ends (a process that dies while migrating frees it).
type namedLock struct{ name string }

// namedLockWait is how long one process waits for another's migrations.
const namedLockWait = 5 * time.Minute

func (l namedLock) SessionLock(ctx context.Context, conn *sql.Conn) error {
	var got sql.NullInt64
	if err := conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", l.name, int(namedLockWait/time.Second)).Scan(&got); err != nil {
		return fmt.Errorf("migrations: lock %s: %w", l.name, err)
	}
	if got.Int64 != 1 {
		return fmt.Errorf("migrations: lock %s: not granted within %v", l.name, namedLockWait)
	}
	return nil
}

func (l namedLock) SessionUnlock(ctx context.Context, conn *sql.Conn) error {
	var released sql.NullInt64
	return conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", l.name).Scan(&released)
}
