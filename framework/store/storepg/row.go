package storepg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"fmt"

	"github.com/jackc/pgx/v5/pgconn"
)

// QueryRow is [store.RowQuerier]: it runs query, which returns at most
// one row, through pgx on a connection of pool, and pgx decodes each
// column into its destination, where database/sql would have pgx make a
// driver.Value of it first and then convert that. A statement that failed
// before reaching the server (the connection was found broken) returns
// driver.ErrBadConn with the cause, and the connection is dropped.
func (Driver) QueryRow(ctx context.Context, pool *sql.DB, query string, args []any, dest func(columns []string) []any) (bool, error) {
	conn, err := pool.Conn(ctx)
	if err != nil {
		return false, err
	}
	defer conn.Close()
	found := false
	err = conn.Raw(func(dc any) error {
		c, err := pgxConn(dc)
		if err != nil {
			return err
		}
		rows, _ := c.Query(ctx, query, args...) // its error is rows.Err()
		defer rows.Close()
		if rows.Next() {
			fds := rows.FieldDescriptions()
			columns := make([]string, len(fds))
			for i := range fds {
				columns[i] = fds[i].Name
			}
			if err := rows.Scan(dest(columns)...); err != nil {
				return err
			}
			found = true
		}
		rows.Close()
		err = rows.Err()
		if err != nil && !found && pgconn.SafeToRetry(err) {
			return fmt.Errorf("%w: %w", driver.ErrBadConn, err)
		}
		return err
	})
	return found, err
}
