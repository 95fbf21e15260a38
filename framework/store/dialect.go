package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"strings"
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
// in dialect_tx.go: the database clock, how a write transaction begins
// with the lock timeout applied to it alone (PostgreSQL's SET LOCAL
// lock_timeout, SQLite's busy timeout and BEGIN IMMEDIATE), how it
// commits, and what [New] checks at start-up.
type Dialect interface {
	// Name is "postgres" or "sqlite"; it is also the migrations folder.
	Name() string
	// Now is the database clock as an SQL expression, for the times that
	// processes whose clocks disagree must judge alike: PostgreSQL's
	// statement_timestamp() (when the statement arrived, not when a
	// transaction that may have stalled began), SQLite's 'now' as UTC
	// text with milliseconds (its clock's precision). Scan its value into
	// a [DatabaseTime].
	Now() string
	// LockRow makes the query q take a row lock (SELECT … FOR UPDATE). On
	// SQLite every write transaction begins IMMEDIATE and so already holds
	// the database's write lock: q is returned unchanged.
	LockRow(q *gorm.DB) *gorm.DB
	// classify reports whether err is a lock timeout or an outage.
	classify(err error) (lockTimeout, unavailable bool)
	// begin, pipelined and check are in dialect_tx.go.
	begin(lockTimeout, statementTimeout time.Duration) []string
	pipelined() bool
	check(ctx context.Context, db *sql.DB) error
}

var (
	_ Dialect = postgresDialect{}
	_ Dialect = sqliteDialect{}
)

type postgresDialect struct{}

func (postgresDialect) Name() string { return "postgres" }

func (postgresDialect) Now() string { return "statement_timestamp()" }

func (postgresDialect) LockRow(q *gorm.DB) *gorm.DB {
	return q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
}

// classify puts connection-class failures first: a server error that
// arrives while connecting (the database is starting up, shutting down, or
// has no connection slot left) is an outage whatever its SQLSTATE.
func (postgresDialect) classify(err error) (lockTimeout, unavailable bool) {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) ||
		pgconn.Timeout(err) || isNetworkError(err) {
		return false, true
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return false, false
	}
	switch pgErr.Code {
	case "55P03", // lock_not_available (lock_timeout)
		"40001", // serialization_failure
		"40P01": // deadlock_detected
		return true, false
	case "57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now (starting up, shutting down, recovery)
		"57P04", // database_dropped
		"57P05", // idle_session_timeout
		"57014", // query_canceled (statement_timeout, a cancel request)
		"25P03", // idle_in_transaction_session_timeout
		"25006", // read_only_sql_transaction: a standby, or a primary fenced read-only for a switchover
		"58000", // system_error
		"58030": // io_error
		return false, true
	}
	// Whole classes: 08 connection_exception, 53 insufficient_resources
	// (53300 too_many_connections, 53100 disk_full).
	return false, strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53")
}

type sqliteDialect struct{}

func (sqliteDialect) Name() string { return "sqlite" }

func (sqliteDialect) Now() string { return "strftime('%Y-%m-%d %H:%M:%f', 'now')" }

func (sqliteDialect) LockRow(q *gorm.DB) *gorm.DB { return q }

// SQLite primary result codes (the low byte of an extended code).
const (
	sqliteBusy   = 5
	sqliteLocked = 6
	// sqliteInterrupt: the driver interrupted a statement whose context
	// ended (the request deadline).
	sqliteInterrupt = 9
	sqliteReadonly  = 8
	sqliteIOErr     = 10
	sqliteFull      = 13
	sqliteCantOpen  = 14
)

func (sqliteDialect) classify(err error) (lockTimeout, unavailable bool) {
	var sqlErr *sqlite.Error
	if errors.As(err, &sqlErr) {
		switch sqlErr.Code() & 0xff {
		case sqliteBusy, sqliteLocked:
			return true, false
		case sqliteReadonly, sqliteIOErr, sqliteFull, sqliteCantOpen, sqliteInterrupt:
			return false, true
		}
		return false, false
	}
	return false, isNetworkError(err)
}

// isNetworkError reports errors that mean the connection to the database is
// gone or did not answer in time, whatever the driver: a network error, a
// closed connection, or the context's deadline (the request deadline ran out
// while waiting for a connection or an answer).
func isNetworkError(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}
