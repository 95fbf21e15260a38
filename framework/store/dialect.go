package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"
	"time"

	sqlite "github.com/glebarez/go-sqlite"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Dialect is the one seam for the SQL that differs between PostgreSQL and
// SQLite. Upsert spelling (INSERT … ON CONFLICT DO NOTHING) is the same in
// both and is written by gorm's clause.OnConflict; what differs is here and
// in dialect_tx.go: how a write transaction begins with the lock timeout
// applied to it alone (PostgreSQL's SET LOCAL lock_timeout, SQLite's busy
// timeout and BEGIN IMMEDIATE), how it commits, and what [New] checks at
// start-up.
type Dialect interface {
	// Name is "postgres" or "sqlite"; it is also the migrations folder.
	Name() string
	// LockRow makes the query q take a row lock (SELECT … FOR UPDATE). On
	// SQLite every write transaction begins IMMEDIATE and so already holds
	// the database's write lock: q is returned unchanged.
	LockRow(q *gorm.DB) *gorm.DB
	// classify reports whether err is a lock timeout or an outage.
	classify(err error) (lockTimeout, unavailable bool)
	// begin, commit and check are in dialect_tx.go.
	begin(lockTimeout time.Duration) []string
	commit(ctx context.Context, conn *sql.Conn) error
	check(ctx context.Context, db *sql.DB) error
}

var (
	_ Dialect = postgresDialect{}
	_ Dialect = sqliteDialect{}
)

type postgresDialect struct{}

func (postgresDialect) Name() string { return "postgres" }

func (postgresDialect) LockRow(q *gorm.DB) *gorm.DB {
	return q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
}

func (postgresDialect) classify(err error) (lockTimeout, unavailable bool) {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "55P03", // lock_not_available
			pgErr.Code == "40001", // serialization_failure
			pgErr.Code == "40P01": // deadlock_detected
			return true, false
		case pgErr.Code[:2] == "08", // connection exception
			pgErr.Code[:2] == "53",                                              // insufficient resources
			pgErr.Code == "57P01", pgErr.Code == "57P02", pgErr.Code == "57P03": // shutdown, cannot connect now
			return false, true
		}
		return false, false
	}
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) {
		return false, true
	}
	return false, isNetworkError(err)
}

type sqliteDialect struct{}

func (sqliteDialect) Name() string { return "sqlite" }

func (sqliteDialect) LockRow(q *gorm.DB) *gorm.DB { return q }

// SQLite primary result codes (the low byte of an extended code).
const (
	sqliteBusy     = 5
	sqliteLocked   = 6
	sqliteReadonly = 8
	sqliteIOErr    = 10
	sqliteFull     = 13
	sqliteCantOpen = 14
)

func (sqliteDialect) classify(err error) (lockTimeout, unavailable bool) {
	var sqlErr *sqlite.Error
	if errors.As(err, &sqlErr) {
		switch sqlErr.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return true, false
		case sqliteReadonly, sqliteIOErr, sqliteFull, sqliteCantOpen:
			return false, true
		}
		return false, false
	}
	return false, isNetworkError(err)
}

// isNetworkError reports errors that mean the connection to the database is
// gone, whatever the driver.
func isNetworkError(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}
