package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"

	"gorm.io/gorm"
)

// RowQuerier runs a statement of at most one row through a database
// driver's own interface (storepg: pgx), without database/sql's conversion
// of each column into a driver.Value and then into its destination. A
// driver that has one declares it in the spellings of its statements; the
// framework's hottest reads on the pool run through it ([QueryRow]): a row
// by its key (a PUT's read-first, a replay's only statement) and an
// idempotency record.
type RowQuerier interface {
	// QueryRow runs query with args on a connection of pool and, when it
	// returns a row, scans the row into dest(columns), the destinations of
	// its columns by name, and reports true. An error that is
	// driver.ErrBadConn says that the connection was found broken before
	// the statement reached the database: nothing ran.
	QueryRow(ctx context.Context, pool *sql.DB, query string, args []any, dest func(columns []string) []any) (bool, error)
}

// QueryRow runs query with args on pool and scans the row it returns, if
// any, into dest(columns), the destinations of its columns by name, and
// reports whether there was one. Where pool is the *sql.DB and q is set,
// q runs it; otherwise (a transaction's connection, no q), and when q
// found its connection broken before the statement went out, database/sql
// does, which retries on another connection.
func QueryRow(ctx context.Context, q RowQuerier, pool gorm.ConnPool, query string, args []any, dest func(columns []string) []any) (bool, error) {
	if q != nil {
		if db, ok := pool.(*sql.DB); ok {
			found, err := q.QueryRow(ctx, db, query, args, dest)
			if !errors.Is(err, driver.ErrBadConn) {
				return found, err
			}
		}
	}
	rows, err := pool.QueryContext(ctx, query, args...)
	if err != nil {
		return false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return false, rows.Err()
	}
	columns, err := rows.Columns()
	if err != nil {
		return false, err
	}
	if err := rows.Scan(dest(columns)...); err != nil {
		return false, err
	}
	return true, rows.Close()
}
