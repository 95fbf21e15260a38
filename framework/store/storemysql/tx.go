package storemysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strconv"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/retrysafe/retrysafe/framework/store"
)

// A write transaction on the MySQL family sets, for itself alone, what the
// framework needs on the session: READ COMMITTED (InnoDB's REPEATABLE READ
// takes gap locks, which turn concurrent inserts of neighbouring keys into
// lock waits and deadlocks), the lock wait timeout and the statement
// timeout. These are session variables, so a pooled connection would keep
// what the last transaction set: beginSQL saves the session's values in
// user variables in the same statement, and restoreSQL puts them back
// when the transaction ends, so that the application's own use of the
// connection sees what it had. MariaDB's SET STATEMENT … FOR bounds one
// statement, not a transaction: only a transaction sent whole as one
// compound statement takes its settings that way (see [batchTx.Finish]),
// and needs no restore.

// beginSQL is the one statement before START TRANSACTION. The SET list is
// evaluated left to right, so the session's values are saved before they
// change.
func beginSQL(lockTimeout, statementTimeout time.Duration) string {
	lockWait, statementTime := settings(lockTimeout, statementTimeout)
	return "SET @retrysafe_lock_wait = @@session.innodb_lock_wait_timeout, " +
		"@retrysafe_statement_time = @@session.max_statement_time, " +
		"@retrysafe_isolation = @@session.tx_isolation, " +
		"SESSION innodb_lock_wait_timeout = " + lockWait + ", " +
		"SESSION max_statement_time = " + statementTime + ", " +
		"SESSION tx_isolation = 'READ-COMMITTED'"
}

// settings spells the lock wait timeout and the statement timeout as
// innodb_lock_wait_timeout and max_statement_time take them.
// innodb_lock_wait_timeout is in whole seconds: a lock timeout below one
// second waits one second.
func settings(lockTimeout, statementTimeout time.Duration) (lockWait, statementTime string) {
	return strconv.FormatInt(max(1, int64((lockTimeout+time.Second-1)/time.Second)), 10),
		strconv.FormatFloat(max(statementTimeout, time.Millisecond).Seconds(), 'f', 6, 64)
}

// restoreSQL puts back what beginSQL saved.
const restoreSQL = "SET SESSION innodb_lock_wait_timeout = @retrysafe_lock_wait, " +
	"SESSION max_statement_time = @retrysafe_statement_time, SESSION tx_isolation = @retrysafe_isolation"

// tx is the connection of one store.DB.Write transaction ([store.Tx]):
// statements run on it as they come. It is a pointer, as gorm checks
// committers for nil.
type tx struct {
	conn *sql.Conn
	// failed is set when the server rolled the whole transaction back
	// (a deadlock): every later statement would run outside any
	// transaction, in autocommit, so none is sent.
	failed error
}

var _ store.Tx = (*tx)(nil)

// begin begins a write transaction on conn. A begin that fails leaves the
// session as it was, or the connection is discarded.
func begin(ctx context.Context, conn *sql.Conn, lockTimeout, statementTimeout time.Duration) (*tx, error) {
	if _, err := conn.ExecContext(ctx, beginSQL(lockTimeout, statementTimeout)); err != nil {
		discardIfBroken(conn, err)
		return nil, err
	}
	if _, err := conn.ExecContext(ctx, "START TRANSACTION"); err != nil {
		t := &tx{conn: conn}
		t.Abort(ctx)
		return nil, err
	}
	return &tx{conn: conn}, nil
}

// check records err when it means the server ended the transaction.
func (t *tx) check(err error) error {
	var myErr *mysql.MySQLError
	if errors.As(err, &myErr) && myErr.Number == erLockDeadlock || kindOf(err) == unavailable {
		t.failed = err
	}
	return err
}

func (t *tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if t.failed != nil {
		return nil, t.failed
	}
	st, err := t.conn.PrepareContext(ctx, query)
	return st, t.check(err)
}

func (t *tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if t.failed != nil {
		return nil, t.failed
	}
	res, err := t.conn.ExecContext(ctx, query, args...)
	return res, t.check(err)
}

func (t *tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if t.failed != nil {
		return nil, t.failed
	}
	rows, err := t.conn.QueryContext(ctx, query, args...)
	return rows, t.check(err)
}

// QueryRowContext cannot return an error of its own: after a failure it
// runs the query on a cancelled context, so that nothing reaches the
// server and the caller's Scan fails.
func (t *tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if t.failed != nil {
		ctx, cancel := context.WithCancelCause(ctx)
		cancel(t.failed)
		return t.conn.QueryRowContext(ctx, query, args...)
	}
	return t.conn.QueryRowContext(ctx, query, args...)
}

// Failed is the error with which the server ended the transaction.
func (t *tx) Failed() error { return t.failed }

// Commit fails: Write commits when fn returns nil.
func (*tx) Commit() error { return store.ErrOwnedByWrite }

// Rollback fails: Write rolls back when fn returns an error.
func (*tx) Rollback() error { return store.ErrOwnedByWrite }

// Finish commits and restores the session. A failed COMMIT leaves the
// transaction's outcome unknown to this side: the connection is discarded.
func (t *tx) Finish(ctx context.Context) error {
	if t.failed != nil {
		t.Abort(ctx)
		return t.failed
	}
	if _, err := t.conn.ExecContext(ctx, "COMMIT"); err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
		return err
	}
	if _, err := t.conn.ExecContext(ctx, restoreSQL); err != nil {
		// Committed; the session keeps the transaction's settings, so it
		// does not go back to the pool.
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
	return nil
}

// Abort rolls back and restores the session, or discards the connection
// when either fails.
func (t *tx) Abort(ctx context.Context) {
	ctx = context.WithoutCancel(ctx)
	if _, err := t.conn.ExecContext(ctx, "ROLLBACK"); err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
		return
	}
	if _, err := t.conn.ExecContext(ctx, restoreSQL); err != nil {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// discardIfBroken discards conn when err says it is broken.
func discardIfBroken(conn *sql.Conn, err error) {
	if kindOf(err) == unavailable {
		_ = conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}
