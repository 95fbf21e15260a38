package store

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/database"
	"gorm.io/gorm"
)

// Migrations is what a [Driver] declares of its database's migrations
// ([Driver.Migrations]): the framework's own tables, and what goose needs
// to apply those and any application's ([DB.Migrate]).
type Migrations struct {
	// Files are the framework's own migrations on this database (its
	// idempotency records, their resolutions' audit and the operations'
	// published codes; the outbox and the consumer inbox): goose SQL files
	// at the root, numbered alike in every driver, so that every store has
	// the same tables.
	Files fs.FS
	// Dialect is goose's name of the database's SQL ("postgres",
	// "sqlite3", "mysql"), for its version table.
	Dialect string
	// TransactionalDDL reports that DDL commits with the transaction that
	// runs it (PostgreSQL, SQLite), so that a migration stopped half-way
	// leaves nothing. Where it does not (the MySQL family: a CREATE TABLE
	// commits by itself), every statement of a migration is written to be
	// run again (IF NOT EXISTS, IF EXISTS; its files say -- +goose NO
	// TRANSACTION), and [DB.Migrate] writes goose's version table and its
	// row of version 0 before goose runs, each on its own, so that a crash
	// between the two never leaves a table goose refuses.
	TransactionalDDL bool
	// Lock, when set, returns the lock of the migrations versioned in
	// versionTable, which a process holds on its connection while it
	// migrates, so that processes starting at once take turns (PostgreSQL:
	// an advisory lock; the MySQL family: a named lock). Where it is nil
	// (SQLite, the database of one process) migrators must not run at
	// once.
	Lock func(versionTable string) (MigrationLock, error)
}

// MigrationLock is a lock held on one connection (goose's
// lock.SessionLocker): taken before migrating, released after, on the
// same connection; the database drops it when the session ends, so that a
// process that dies while migrating frees it.
type MigrationLock interface {
	SessionLock(ctx context.Context, conn *sql.Conn) error
	SessionUnlock(ctx context.Context, conn *sql.Conn) error
}

// Migration is the state of one migration, as [DB.MigrationStatus] reads
// it.
type Migration struct {
	Version int64
	// Name is the migration's file name.
	Name    string
	Applied bool
	// AppliedAt is when it was applied (zero while pending).
	AppliedAt time.Time
}

// Migrate applies every pending migration of files (goose SQL files at
// its root, for this store's database) on db with goose, versioned in
// versionTable, a goose version table of its own for each set of
// migrations, under the driver's lock ([Migrations.Lock]). It is
// idempotent: every process may call it at start. package migrations
// applies the framework's tables with it (migrations.Up), and an
// application's own per-database folders (migrations.Apply).
func (db *DB) Migrate(ctx context.Context, files fs.FS, versionTable string) error {
	provider, err := db.migrationProvider(files, versionTable)
	if err != nil {
		return err
	}
	if !db.Driver.Migrations().TransactionalDDL {
		if err := db.writeVersionTable(ctx, versionTable); err != nil {
			return err
		}
	}
	if _, err := provider.Up(ctx); err != nil {
		return fmt.Errorf("store: migrations up %s: %w", versionTable, err)
	}
	return nil
}

// MigrationStatus reads which migrations of files are applied on db,
// versioned in versionTable, without changing anything: on a database
// that has none yet (no version table), every migration is pending.
func (db *DB) MigrationStatus(ctx context.Context, files fs.FS, versionTable string) ([]Migration, error) {
	provider, err := db.migrationProvider(files, versionTable)
	if err != nil {
		return nil, err
	}
	var out []Migration
	if !db.Gorm.WithContext(ctx).Migrator().HasTable(versionTable) {
		for _, src := range provider.ListSources() {
			out = append(out, Migration{Version: src.Version, Name: filepath.Base(src.Path)})
		}
		return out, nil
	}
	status, err := provider.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("store: migrations status: %w", err)
	}
	for _, st := range status {
		out = append(out, Migration{Version: st.Source.Version, Name: filepath.Base(st.Source.Path),
			Applied: st.State == goose.StateApplied, AppliedAt: st.AppliedAt})
	}
	return out, nil
}

// migrationProvider is the goose provider of files on db, versioned in
// versionTable.
func (db *DB) migrationProvider(files fs.FS, versionTable string) (*goose.Provider, error) {
	if versionTable == "" {
		return nil, errors.New("store: a migrations version table name is required")
	}
	m := db.Driver.Migrations()
	opts := []goose.ProviderOption{goose.WithDisableGlobalRegistry(true), goose.WithTableName(versionTable)}
	if m.Lock != nil {
		l, err := m.Lock(versionTable)
		if err != nil {
			return nil, fmt.Errorf("store: migrations: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(l))
	}
	provider, err := goose.NewProvider(goose.Dialect(m.Dialect), db.SQL(), files, opts...)
	if err != nil {
		return nil, fmt.Errorf("store: migrations: %w", err)
	}
	return provider, nil
}

// writeVersionTable creates goose's version table, and its row of version
// 0, unless they are there, under the migrations' lock, before goose runs,
// on a database whose DDL is not transactional. goose would create both
// in one transaction, but there a CREATE TABLE commits by itself and is
// no part of one: a process stopped between the two left a table on which
// goose refuses every later Up ("missing zero version migration"); the
// same error ended two loaded test runs in a fresh database, most likely
// the insert failing in goose's transaction and goose's retry, finding
// the table, skipping it. Here each runs on its own, the insert retried,
// and a table found without its row gets the row.
func (db *DB) writeVersionTable(ctx context.Context, versionTable string) (retErr error) {
	m := db.Driver.Migrations()
	conn, err := db.SQL().Conn(ctx)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	defer func() { retErr = errors.Join(retErr, conn.Close()) }()
	if m.Lock != nil {
		l, err := m.Lock(versionTable)
		if err != nil {
			return fmt.Errorf("store: migrations: %w", err)
		}
		if err := l.SessionLock(ctx, conn); err != nil {
			return err
		}
		defer func() { retErr = errors.Join(retErr, l.SessionUnlock(context.WithoutCancel(ctx), conn)) }()
	}
	vs, err := database.NewStore(database.Dialect(m.Dialect), versionTable)
	if err != nil {
		return fmt.Errorf("store: migrations: %w", err)
	}
	// On the connection that holds the lock: a pool of one connection
	// (MaxOpenConns 1) has no other.
	onConn := db.Gorm.Session(&gorm.Session{NewDB: true, Context: ctx})
	onConn.Statement.ConnPool = conn
	if !onConn.Migrator().HasTable(versionTable) {
		if err := vs.CreateVersionTable(ctx, conn); err != nil {
			return fmt.Errorf("store: migrations: create %s: %w", versionTable, err)
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
		return fmt.Errorf("store: migrations: the version table's zero version: %w", err)
	}
	return nil
}
