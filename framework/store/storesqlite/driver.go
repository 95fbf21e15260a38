package storesqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/glebarez/go-sqlite"
	gormsqlite "github.com/glebarez/sqlite"
	"go.opentelemetry.io/otel/attribute"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

func init() { store.Register(Driver{}) }

// Driver is the SQLite [store.Driver].
type Driver struct{}

var _ store.Driver = Driver{}

// Name is "sqlite".
func (Driver) Name() string { return "sqlite" }

// Dialectors: github.com/glebarez/sqlite ("sqlite"), and the name other
// SQLite dialectors use ("sqlite3").
func (Driver) Dialectors() []string { return []string{"sqlite", "sqlite3"} }

// Schemes: "sqlite:PATH".
func (Driver) Schemes() []string { return []string{"sqlite:"} }

// DefaultMaxOpenConns is 4: writers take turns on one database lock.
func (Driver) DefaultMaxOpenConns() int { return 4 }

// Now is SQLite's 'now' as UTC text with milliseconds (its clock's
// precision), which [store.DatabaseTime] reads.
func (Driver) Now() string { return "strftime('%Y-%m-%d %H:%M:%f', 'now')" }

// LockRow returns q unchanged: every write transaction begins IMMEDIATE
// and so already holds the database's write lock.
func (Driver) LockRow(q *gorm.DB) *gorm.DB { return q }

// Open opens (and creates) the SQLite file of "sqlite:PATH" in WAL mode,
// with a busy timeout of cfg.LockTimeout for statements outside
// store.DB.Write and foreign keys on, through otelsql, which traces every
// statement without its arguments and its errors redacted.
func (Driver) Open(_ context.Context, dsn string, cfg store.Config) (gorm.Dialector, *sql.DB, error) {
	path := strings.TrimPrefix(dsn, "sqlite:")
	if path == "" {
		return nil, nil, fmt.Errorf("%w: empty SQLite path", store.ErrUnknownDSN)
	}
	pool, err := otelsql.Open(gormsqlite.DriverName, driverDSN(path, cfg.LockTimeout),
		otelsql.WithTracerProvider(store.RedactingTracerProvider(cfg.TracerProvider)),
		otelsql.WithAttributes(attribute.String("db.system.name", "sqlite")),
		otelsql.WithSpanOptions(otelsql.SpanOptions{OmitConnResetSession: true, OmitRows: true, OmitConnectorConnect: true}))
	if err != nil {
		return nil, nil, err
	}
	return &gormsqlite.Dialector{DriverName: gormsqlite.DriverName, Conn: pool}, pool, nil
}

// driverDSN builds the driver DSN: WAL journal, a busy timeout as the lock
// timeout for statements outside store.DB.Write, foreign keys on.
func driverDSN(path string, lockTimeout time.Duration) string {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", lockTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(NORMAL)")
	return "file:" + path + "?" + q.Encode()
}

// Check requires WAL: in the rollback-journal modes a reader blocks the
// writer, so replays and reads would fail with "database is locked" under
// load. WAL is a property of the database file, which the framework does
// not change behind the application's back.
func (d Driver) Check(ctx context.Context, gdb *gorm.DB) (store.Driver, error) {
	if err := check(ctx, gdb); err != nil {
		return nil, err
	}
	return d, nil
}

// check is [Driver.Check]'s reading of gdb.
func check(ctx context.Context, gdb *gorm.DB) error {
	db, err := gdb.DB()
	if err != nil {
		return err
	}
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("%w: the SQLite database is in journal_mode %q, not WAL: open it with _pragma=journal_mode(WAL) in the DSN or run PRAGMA journal_mode=WAL once", store.ErrMisconfigured, mode)
	}
	return nil
}

// SQLite result codes: primary codes are the low byte of an extended code.
const (
	codeBusy   = 5
	codeLocked = 6
	// codeInterrupt: the driver interrupted a statement whose context
	// ended (the request deadline).
	codeInterrupt = 9
	codeReadonly  = 8
	codeIOErr     = 10
	codeFull      = 13
	codeCantOpen  = 14
	// Extended codes of SQLITE_CONSTRAINT (19).
	codeConstraintPrimaryKey = 1555
	codeConstraintUnique     = 2067
)

// Classify reads SQLite's result codes. SQLite stores any text, so
// nothing is [store.ErrUnstorableText]. A wait for a lock is a wait for
// the database's write lock, whoever holds it: [store.ErrBusy].
func (Driver) Classify(err error) error {
	var sqlErr *sqlite.Error
	if !errors.As(err, &sqlErr) {
		if store.ConnectionLost(err) {
			return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
		}
		return err
	}
	switch sqlErr.Code() {
	case codeConstraintPrimaryKey, codeConstraintUnique:
		return fmt.Errorf("%w: %w", store.ErrUniqueViolation, err)
	}
	switch sqlErr.Code() & 0xff {
	case codeBusy, codeLocked:
		// The database's one write lock, never a row's.
		return fmt.Errorf("%w: %w: %w", store.ErrLockTimeout, store.ErrBusy, err)
	case codeReadonly, codeIOErr, codeFull, codeCantOpen, codeInterrupt:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// busy reports SQLite's answer that another writer holds the lock.
func busy(err error) bool {
	var sqlErr *sqlite.Error
	return errors.As(err, &sqlErr) && (sqlErr.Code()&0xff == codeBusy || sqlErr.Code()&0xff == codeLocked)
}

// busySlice is how long one try of BEGIN IMMEDIATE waits for another
// writer. SQLite's busy wait does not notice an interrupt, so Begin waits
// in slices and checks the context between them: a request whose client
// went away, or whose deadline passed, stops waiting within a slice
// instead of holding its connection for the whole lock timeout.
const busySlice = 20 * time.Millisecond

// Begin takes the write lock up front (BEGIN IMMEDIATE), waiting for
// another writer in slices of [busySlice] until the lock timeout, then
// sets the connection's busy timeout to the lock timeout, which bounds the
// commit's wait. The busy timeout stays on the connection; it is harmless
// to the application's own use of it. SQLite has no statement timeout:
// the context (the request deadline) interrupts a statement.
func (Driver) Begin(ctx context.Context, conn *sql.Conn, opts store.TxOptions) (store.Tx, error) {
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	for _, stmt := range []string{
		"PRAGMA busy_timeout = " + ms(min(opts.LockTimeout, busySlice)),
		"BEGIN IMMEDIATE",
		"PRAGMA busy_timeout = " + ms(opts.LockTimeout),
	} {
		if err := execBegin(ctx, conn, stmt, opts.LockTimeout); err != nil {
			// A failed begin may have left a transaction open or none
			// (BEGIN IMMEDIATE was busy): roll back whatever there is,
			// and keep the connection either way.
			_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
			return nil, err
		}
	}
	return &tx{conn: conn}, nil
}

// execBegin sends one statement of the begin. A statement refused as busy
// (another writer holds the lock) is sent again until lockTimeout has
// passed, and not once the context has ended: then the context's error is
// returned, so that a client that went away is not taken for a lock
// timeout.
func execBegin(ctx context.Context, conn *sql.Conn, stmt string, lockTimeout time.Duration) error {
	until := time.Now().Add(lockTimeout)
	for {
		_, err := conn.ExecContext(ctx, stmt)
		if err == nil || !busy(err) {
			return err
		}
		if ctxErr := ctx.Err(); ctxErr != nil {
			return ctxErr
		}
		if !time.Now().Before(until) {
			return err
		}
	}
}

// ClockResolution is a millisecond: Now reads SQLite's clock as
// strftime('%f'), milliseconds truncated, so an estimate of it
// ([store.Clock]) is truncated to milliseconds too.
func (Driver) ClockResolution() time.Duration { return time.Millisecond }
