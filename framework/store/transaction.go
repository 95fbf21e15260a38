package store

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
)

// Write runs fn in one write transaction, commits when fn returns nil and
// rolls back otherwise. Errors are passed through [DB.Classify]. Pass the
// *gorm.DB that fn receives to every transactional twin (…Tx) so that its
// writes commit together.
//
// The transaction is begun by the driver ([Driver.Begin]) on a connection
// of the application's pool with what the framework needs set for this
// transaction only: on PostgreSQL BEGIN and SET LOCAL lock_timeout, sent
// with the first statement (it also holds behind PgBouncer in transaction
// pooling), on SQLite the connection's busy timeout and BEGIN IMMEDIATE
// (the write lock is taken up front, so two writers never deadlock on a
// lock upgrade). fn's *gorm.DB is a gorm transaction as far as gorm is
// concerned: a nested tx.Transaction becomes a savepoint, and gorm's own
// default transaction is skipped.
func (db *DB) Write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.Classify(db.write(ctx, fn))
}

// rolledBackRuns is how many times [DB.WriteRetrying] runs a transaction
// that the database keeps rolling back.
const rolledBackRuns = 3

// WriteRetrying is [DB.Write], run again (three runs in all) while the
// database rolls the transaction back whole to break a deadlock or a
// serialization conflict ([ErrRolledBack]) and ctx lives. Such a
// transaction committed nothing, so running it again is safe for an fn
// whose effects are all inside the transaction: fn may run more than
// once, each time on a new transaction, and must set anything it reports
// to its caller afresh on each run. An fn that calls another system
// (a payment provider) must use [DB.Write]. The last run's error is
// returned; it still wraps [ErrLockTimeout] (503 unavailable, or 409
// request_in_progress on the key's own row, with Retry-After: the client
// retries later, as after a lock wait).
func (db *DB) WriteRetrying(ctx context.Context, fn func(tx *gorm.DB) error) error {
	var err error
	for range rolledBackRuns {
		if err = db.Write(ctx, fn); !errors.Is(err, ErrRolledBack) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

func (db *DB) write(ctx context.Context, fn func(tx *gorm.DB) error) (err error) {
	ctx, span := db.tracer.Start(ctx, "store.write", trace.WithAttributes(attribute.String("db.system.name", db.Driver.Name())))
	defer func() { endSpan(span, err) }()
	sqlDB, err := db.Gorm.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	opts := TxOptions{LockTimeout: db.lockTimeout, StatementTimeout: db.statementTimeout}
	if opts.LockTimeout == 0 {
		opts.LockTimeout = time.Second
	}
	if opts.StatementTimeout == 0 {
		opts.StatementTimeout = 5 * time.Second
	}
	t, err := db.Driver.Begin(ctx, conn, opts)
	if err != nil {
		return err
	}
	// A context that ended while a statement was being sent may have made
	// the driver skip it and report success (the pure-Go SQLite driver
	// does): from here on, an ended context means nothing commits.
	if err := ctx.Err(); err != nil {
		t.Abort(ctx)
		return err
	}
	tx := db.Gorm.Session(&gorm.Session{NewDB: true, Context: ctx, SkipDefaultTransaction: true})
	tx.Statement.ConnPool = t
	panicked := true
	defer func() {
		if panicked {
			t.Abort(ctx)
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
		if f, ok := t.(interface{ Failed() error }); ok && f.Failed() != nil && ctx.Err() == nil && !errors.Is(err, f.Failed()) {
			// The transaction failed on the server first (a queued
			// write, a deadlock): nothing fn did after it reached the
			// server, and fn's error is its echo (a Scan of a query that
			// could not be sent reports a cancelled context or a bad
			// connection). The cause is the answer.
			err = f.Failed()
		}
		t.Abort(ctx)
		return err
	}
	if err := t.Finish(ctx); err != nil {
		t.Abort(ctx)
		return err
	}
	return nil
}
