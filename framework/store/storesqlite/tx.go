package storesqlite

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"strings"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// tx is the connection of one store.DB.Write transaction on SQLite
// ([store.Tx]): statements run on it as they come (SQLite runs in the
// process; there is no round trip to save). It is a pointer, as gorm
// checks committers for nil.
type tx struct{ conn *sql.Conn }

var _ store.Tx = (*tx)(nil)

func (t *tx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	return t.conn.PrepareContext(ctx, query)
}

func (t *tx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.conn.ExecContext(ctx, query, args...)
}

func (t *tx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return t.conn.QueryContext(ctx, query, args...)
}

func (t *tx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	return t.conn.QueryRowContext(ctx, query, args...)
}

// Commit fails: Write commits when fn returns nil.
func (*tx) Commit() error { return store.ErrOwnedByWrite }

// Rollback fails: Write rolls back when fn returns an error.
func (*tx) Rollback() error { return store.ErrOwnedByWrite }

// Finish commits without the caller's cancellation: the pure-Go driver
// skips a statement whose context ends as it starts and reports success,
// which would leave the transaction open on a pooled connection (write
// applied 0 times, answered once); the busy timeout still bounds it.
func (t *tx) Finish(ctx context.Context) error {
	_, err := t.conn.ExecContext(context.WithoutCancel(ctx), "COMMIT")
	return err
}

// Abort rolls the transaction back. When the ROLLBACK fails for another
// reason than there being no transaction, the connection's state is
// unknown, so it is closed rather than returned to the pool.
func (t *tx) Abort(ctx context.Context) {
	if _, err := t.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil && !noTransaction(err) {
		_ = t.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// noTransaction reports SQLite's answer to a ROLLBACK with no transaction
// open: a statement interrupted by its cancelled context rolls its
// transaction back itself, and a cancelled BEGIN may have begun none. The
// connection is then in a known state and stays in the pool. Closing it
// there and then would also race the pure-Go driver's interrupt goroutine,
// which may still be reading the connection unlocked (the race detector
// caught it).
func noTransaction(err error) bool {
	return strings.Contains(err.Error(), "no transaction is active")
}

// ReadSnapshot runs the queries on conn in one read transaction (BEGIN,
// which in WAL mode reads one snapshot from its first SELECT to its end)
// and ends it with ROLLBACK: nothing was written. A connection that cannot
// end it is not returned to the pool.
func (Driver) ReadSnapshot(ctx context.Context, db *gorm.DB, conn *sql.Conn, queries []func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error) {
	if _, err := conn.ExecContext(ctx, "BEGIN"); err != nil {
		return nil, err
	}
	defer func() {
		if _, err := conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	built := make([]*gorm.DB, len(queries))
	for i, q := range queries {
		s := db.Session(&gorm.Session{NewDB: true, Context: ctx})
		s.Statement.ConnPool = conn
		built[i] = q(s)
		if err := built[i].Error; err != nil && !errors.Is(err, gorm.ErrRecordNotFound) {
			return nil, err
		}
	}
	return built, ctx.Err()
}
