package storemysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/XSAM/otelsql"
	"github.com/go-sql-driver/mysql"
	"go.opentelemetry.io/otel/attribute"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
)

func init() { store.Register(Driver{}) }

// Driver is the MySQL family's [store.Driver]. The zero value is the
// registered one; [Driver.Check] returns the one [store.New] keeps for a
// pool, which knows whether the pool batches statements.
type Driver struct {
	// batch: the pool takes several statements in one query with their
	// placeholders filled in by go-sql-driver (multiStatements=true,
	// interpolateParams=true), so a write transaction pipelines
	// ([batchTx]).
	batch bool
}

var _ store.Driver = Driver{}

// MinMariaDBVersion is the oldest MariaDB [store.New] accepts: the
// framework's SQL and tables need sequences (10.3, the fences), INSERT …
// RETURNING (10.5), SELECT … FOR UPDATE SKIP LOCKED (10.6) and the UUID
// type (10.7, the IDs of its migrations).
const MinMariaDBVersion = "10.7"

// Name is "mysql".
func (Driver) Name() string { return "mysql" }

// Dialectors: gorm.io/driver/mysql ("mysql").
func (Driver) Dialectors() []string { return []string{"mysql"} }

// Schemes: "mysql://user:pass@host:port/db".
func (Driver) Schemes() []string { return []string{Scheme} }

// DefaultMaxOpenConns is 20, as on PostgreSQL.
func (Driver) DefaultMaxOpenConns() int { return 20 }

// Now is UTC_TIMESTAMP(6): UTC with microseconds whatever the session's
// time zone (NOW(6) would follow it).
func (Driver) Now() string { return "UTC_TIMESTAMP(6)" }

// ClockResolution is a microsecond, UTC_TIMESTAMP(6)'s.
func (Driver) ClockResolution() time.Duration { return time.Microsecond }

// LockRow adds FOR UPDATE.
func (Driver) LockRow(q *gorm.DB) *gorm.DB {
	return q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
}

// datetimePrecision is the fractional seconds of the DATETIME columns that
// gorm's AutoMigrate creates on [Driver.Open]'s handle: microseconds, the
// database clock's, where gorm.io/driver/mysql would make milliseconds.
var datetimePrecision = 6

// Open opens a pool for a mysql:// URL as [Config] sets it up, through
// otelsql, which traces every statement without its arguments and its
// errors redacted.
func (Driver) Open(_ context.Context, dsn string, cfg store.Config) (gorm.Dialector, *sql.DB, error) {
	mc, err := Config(dsn, cfg.ConnectTimeout)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", store.ErrUnknownDSN, err)
	}
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", store.ErrUnknownDSN, err)
	}
	pool := otelsql.OpenDB(connector, otelsql.WithTracerProvider(store.RedactingTracerProvider(cfg.TracerProvider)),
		otelsql.WithAttributes(attribute.String("db.system.name", "mysql")),
		otelsql.WithSpanOptions(otelsql.SpanOptions{OmitConnResetSession: true, OmitRows: true, OmitConnectorConnect: true}))
	return gormmysql.New(gormmysql.Config{Conn: pool, DefaultDatetimePrecision: &datetimePrecision}), pool, nil
}

// Check refuses, with what to change, a connection the framework cannot
// serve correctly: a server other than MariaDB [MinMariaDBVersion]+, a
// session whose character set is not utf8mb4 (SET NAMES utf8mb4, or
// charset=utf8mb4 in the DSN), one that reads DATETIME as bytes
// (parseTime=true), one whose sql_mode is not strict (a too long value
// would be stored truncated), and one that counts matched rather than
// changed rows (clientFoundRows), which would make "insert unless
// present" report an insert for a key already there. The driver it
// returns batches the statements of a write transaction when the pool
// takes several in one query with its placeholders filled in
// (multiStatements=true and interpolateParams=true, as [Driver.Open] and
// [Config] set them up); on any other pool each statement is a round trip
// of its own.
func (Driver) Check(ctx context.Context, gdb *gorm.DB) (store.Driver, error) {
	db, err := gdb.DB()
	if err != nil {
		return nil, err
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	if err := checkSession(ctx, conn); err != nil {
		return nil, err
	}
	batch, err := batches(ctx, conn)
	if err != nil {
		return nil, err
	}
	return Driver{batch: batch}, nil
}

// batches reports whether conn takes two statements with placeholders in
// one query: only go-sql-driver's interpolateParams and multiStatements
// together let it.
func batches(ctx context.Context, conn *sql.Conn) (bool, error) {
	_, err := conn.ExecContext(ctx, "DO ?;\nDO ?", 1, 2)
	if err != nil && kindOf(err) == unavailable {
		return false, err
	}
	return err == nil, nil
}

// checkSession is Check's reading of conn's server and session.
func checkSession(ctx context.Context, conn *sql.Conn) error {
	var (
		version, client, connection, results, mode string
		now                                        any
	)
	if err := conn.QueryRowContext(ctx, "SELECT VERSION(), @@session.character_set_client, @@session.character_set_connection, "+
		"IFNULL(@@session.character_set_results, ''), @@session.sql_mode, UTC_TIMESTAMP(6)").
		Scan(&version, &client, &connection, &results, &mode, &now); err != nil {
		return err
	}
	if err := checkVersion(version); err != nil {
		return err
	}
	for _, cs := range []string{client, connection, results} {
		if cs != "utf8mb4" {
			return fmt.Errorf("%w: the MySQL session's character sets are %s/%s/%s, not utf8mb4: add charset=utf8mb4 to the DSN (or SET NAMES utf8mb4)",
				store.ErrMisconfigured, client, connection, results)
		}
	}
	if _, ok := now.(time.Time); !ok {
		return fmt.Errorf("%w: the MySQL connection reads DATETIME as %T, not time.Time: add parseTime=true to the DSN", store.ErrMisconfigured, now)
	}
	if !strings.Contains(mode, "STRICT_TRANS_TABLES") && !strings.Contains(mode, "STRICT_ALL_TABLES") {
		return fmt.Errorf("%w: the MySQL session's sql_mode %q is not strict, so a value that does not fit would be stored truncated: add STRICT_ALL_TABLES (DSN parameter sql_mode, or the server's sql_mode)",
			store.ErrMisconfigured, mode)
	}
	return checkChangedRows(ctx, conn)
}

// checkVersion accepts MariaDB [MinMariaDBVersion] and later.
func checkVersion(version string) error {
	if !strings.Contains(version, "MariaDB") {
		return fmt.Errorf("%w: the server is MySQL %s; the driver serves MariaDB %s and later (it draws fences from a sequence and claims with INSERT … RETURNING, which MySQL lacks)",
			store.ErrMisconfigured, version, MinMariaDBVersion)
	}
	if olderThan(version, MinMariaDBVersion) {
		return fmt.Errorf("%w: MariaDB %s is older than %s, the oldest the framework supports (UUID type, SKIP LOCKED, RETURNING, sequences)",
			store.ErrMisconfigured, version, MinMariaDBVersion)
	}
	return nil
}

// olderThan compares the major.minor of version with min's.
func olderThan(version, min string) bool {
	num := func(s string) (int, int) {
		parts := strings.SplitN(strings.SplitN(s, "-", 2)[0], ".", 3)
		if len(parts) < 2 {
			return 0, 0
		}
		a, _ := strconv.Atoi(parts[0])
		b, _ := strconv.Atoi(parts[1])
		return a, b
	}
	va, vb := num(version)
	ma, mb := num(min)
	return va < ma || va == ma && vb < mb
}

// checkChangedRows asks the connection what an assignment that changes
// nothing reports as affected, on a temporary table of the session.
func checkChangedRows(ctx context.Context, conn *sql.Conn) error {
	for _, q := range []string{
		"CREATE TEMPORARY TABLE retrysafe_check (k INT PRIMARY KEY)",
		"INSERT INTO retrysafe_check VALUES (1)",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	defer func() { _, _ = conn.ExecContext(context.WithoutCancel(ctx), "DROP TEMPORARY TABLE retrysafe_check") }()
	res, err := conn.ExecContext(ctx, "INSERT INTO retrysafe_check VALUES (1) ON DUPLICATE KEY UPDATE k = k")
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n != 0 {
		return fmt.Errorf("%w: the MySQL connection counts matched rows (clientFoundRows=true): remove it from the DSN, so that an assignment that changes nothing affects no row",
			store.ErrMisconfigured)
	}
	return nil
}

// Classify reads the server's error numbers and the driver's connection
// errors (see [errorKind]).
func (Driver) Classify(err error) error {
	switch kindOf(err) {
	case lockTimeout:
		return fmt.Errorf("%w: %w", store.ErrLockTimeout, err)
	case deadlock:
		return fmt.Errorf("%w: %w: %w", store.ErrLockTimeout, store.ErrRolledBack, err)
	case unavailable:
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	case uniqueViolation:
		return fmt.Errorf("%w: %w", store.ErrUniqueViolation, err)
	case unstorableText:
		return fmt.Errorf("%w: %w", store.ErrUnstorableText, err)
	}
	return err
}

// Begin begins a write transaction with READ COMMITTED and opts' timeouts
// for it alone (see beginSQL). On a pool that batches, the begin is
// queued, to go out with the transaction's first statement ([batchTx]).
func (d Driver) Begin(ctx context.Context, conn *sql.Conn, opts store.TxOptions) (store.Tx, error) {
	if d.batch {
		return beginBatch(conn, opts.LockTimeout, opts.StatementTimeout), nil
	}
	return begin(ctx, conn, opts.LockTimeout, opts.StatementTimeout)
}

// ReadSnapshot runs the queries in one read-only REPEATABLE READ
// transaction begun WITH CONSISTENT SNAPSHOT (InnoDB takes the snapshot at
// the START, not at the first read), and ends it with ROLLBACK; the
// session's isolation level is restored. A connection that cannot end it
// is not returned to the pool.
func (Driver) ReadSnapshot(ctx context.Context, db *gorm.DB, conn *sql.Conn, queries []func(*gorm.DB) *gorm.DB) ([]*gorm.DB, error) {
	if _, err := conn.ExecContext(ctx, "SET @retrysafe_isolation = @@session.tx_isolation, SESSION tx_isolation = 'REPEATABLE-READ'"); err != nil {
		discardIfBroken(conn, err)
		return nil, err
	}
	defer func() {
		ctx := context.WithoutCancel(ctx)
		_, err := conn.ExecContext(ctx, "ROLLBACK")
		if err == nil {
			_, err = conn.ExecContext(ctx, "SET SESSION tx_isolation = @retrysafe_isolation")
		}
		if err != nil {
			_ = conn.Raw(func(any) error { return driver.ErrBadConn })
		}
	}()
	if _, err := conn.ExecContext(ctx, "START TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY"); err != nil {
		return nil, err
	}
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
