package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"time"

	"gorm.io/gorm"
)

// errCommitRolledBack is returned when PostgreSQL answered COMMIT with
// ROLLBACK: a statement of the transaction had failed and its error was
// ignored, so nothing was committed.
var errCommitRolledBack = errors.New("store: the transaction was rolled back at commit (a statement in it had failed)")

// Write runs fn in one write transaction, commits when fn returns nil and
// rolls back otherwise. Errors are passed through [DB.Classify]. Pass the
// *gorm.DB that fn receives to every transactional twin (…Tx) so that its
// writes commit together.
//
// The transaction is begun on a connection of the application's pool with
// what the framework needs set for this transaction only: on PostgreSQL
// BEGIN + SET LOCAL lock_timeout in one round trip (so it also holds behind
// PgBouncer in transaction pooling), on SQLite the connection's busy
// timeout and BEGIN IMMEDIATE (the write lock is taken up front, so two
// writers never deadlock on a lock upgrade). fn's *gorm.DB is a gorm
// transaction as far as gorm is concerned: a nested tx.Transaction becomes
// a savepoint, and gorm's own default transaction is skipped.
func (db *DB) Write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.Classify(db.write(ctx, fn))
}

func (db *DB) write(ctx context.Context, fn func(tx *gorm.DB) error) (err error) {
	sqlDB, err := db.Gorm.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	lockTimeout := db.lockTimeout
	if lockTimeout == 0 {
		lockTimeout = time.Second
	}
	statementTimeout := db.statementTimeout
	if statementTimeout == 0 {
		statementTimeout = 5 * time.Second
	}
	for _, stmt := range db.Dialect.begin(lockTimeout, statementTimeout) {
		if _, err := conn.ExecContext(ctx, stmt); err != nil {
			// A failed begin may have left a transaction open (PostgreSQL:
			// BEGIN ran, SET LOCAL failed) or none (SQLite: BEGIN IMMEDIATE
			// was busy): roll back whatever there is, and keep the
			// connection either way (pgx drops one still in a transaction
			// when it returns to the pool).
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			return err
		}
	}
	// A context that ended while a statement was being sent may have made
	// the driver skip it and report success (the pure-Go SQLite driver
	// does): from here on, an ended context means nothing commits.
	if err := ctx.Err(); err != nil {
		db.abort(ctx, conn)
		return err
	}
	tx := db.Gorm.Session(&gorm.Session{NewDB: true, Context: ctx, SkipDefaultTransaction: true})
	tx.Statement.ConnPool = &pinnedTx{conn}
	panicked := true
	defer func() {
		if panicked {
			db.abort(ctx, conn)
		}
	}()
	err = fn(tx)
	panicked = false
	if err == nil {
		err = tx.Error
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		db.abort(ctx, conn)
		return err
	}
	if err := db.Dialect.commit(ctx, conn); err != nil {
		db.abort(ctx, conn)
		return err
	}
	return nil
}

// abort rolls the transaction on conn back. When that fails the
// connection's state is unknown, so it is closed rather than returned to
// the pool.
func (db *DB) abort(ctx context.Context, conn *sql.Conn) {
	if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// pinnedTx is the connection of one [DB.Write] transaction as gorm sees
// it. It is a gorm.TxCommitter, so that gorm treats it as a transaction
// (nested Transaction calls become savepoints), and not a TxBeginner, so
// that gorm never begins a transaction of its own on it. Commit and
// Rollback belong to Write: called by fn they fail. It is a pointer, as
// gorm checks committers for nil.
type pinnedTx struct{ conn *sql.Conn }

var (
	_ gorm.ConnPool    = (*pinnedTx)(nil)
	_ gorm.TxCommitter = (*pinnedTx)(nil)
)

func (p *pinnedTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return p.conn.PrepareContext(ctx, query)
}

func (p *pinnedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return p.conn.ExecContext(ctx, query, args...)
}

func (p *pinnedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return p.conn.QueryContext(ctx, query, args...)
}

func (p *pinnedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return p.conn.QueryRowContext(ctx, query, args...)
}

var errOwnedByWrite = errors.New("store: the transaction of DB.Write is committed or rolled back by Write, from fn's return value")

// Commit fails: Write commits when fn returns nil.
func (*pinnedTx) Commit() error { return errOwnedByWrite }

// Rollback fails: Write rolls back when fn returns an error.
func (*pinnedTx) Rollback() error { return errOwnedByWrite }
