package storepg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/exaring/otelpgx"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
)

func init() { store.Register(Driver{}) }

// MinVersion is the oldest PostgreSQL that [Driver.Check] accepts (as
// server_version_num): the framework's SQL needs INSERT … ON CONFLICT …
// RETURNING, FOR UPDATE SKIP LOCKED and SET LOCAL, and nothing older than
// 12 is tested.
const MinVersion = 120000

// Driver is the PostgreSQL [store.Driver].
type Driver struct{}

var _ store.Driver = Driver{}

// Name is "postgres".
func (Driver) Name() string { return "postgres" }

// Dialectors: gorm.io/driver/postgres.
func (Driver) Dialectors() []string { return []string{"postgres"} }

// Schemes: postgres:// and postgresql:// URLs.
func (Driver) Schemes() []string { return []string{"postgres://", "postgresql://"} }

// DefaultMaxOpenConns is 20.
func (Driver) DefaultMaxOpenConns() int { return 20 }

// Now is statement_timestamp(): when the statement arrived, not when a
// transaction that may have stalled began.
func (Driver) Now() string { return "statement_timestamp()" }

// ClockResolution is a microsecond, timestamptz's.
func (Driver) ClockResolution() time.Duration { return time.Microsecond }

// LockRow adds FOR UPDATE.
func (Driver) LockRow(q *gorm.DB) *gorm.DB {
	return q.Clauses(clause.Locking{Strength: clause.LockingStrengthUpdate})
}

// Open opens a pgx pool for dsn, with connect_timeout set from
// cfg.ConnectTimeout unless the DSN sets one (it is read by the driver,
// not sent to the server, so it also works behind PgBouncer), whose
// connections trace every query and batch with otelpgx. The tracer sits
// on the pgx connection, under gorm: the pipelined writes and snapshot
// reads, which send pgx batches on the raw connection, are traced like
// gorm's queries. Query parameters are not recorded, and a failed
// statement's error is recorded redacted ([store.RedactingTracerProvider]).
func (Driver) Open(_ context.Context, dsn string, cfg store.Config) (gorm.Dialector, *sql.DB, error) {
	dsn, err := withConnectTimeout(dsn, cfg.ConnectTimeout)
	if err != nil {
		return nil, nil, err
	}
	cc, err := pgx.ParseConfig(dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: %w", store.ErrUnknownDSN, err)
	}
	cc.Tracer = otelpgx.NewTracer(otelpgx.WithTracerProvider(store.RedactingTracerProvider(cfg.TracerProvider)), otelpgx.WithTrimSQLInSpanName())
	WatchReplication(cc)
	var opts []stdlib.OptionOpenDB
	if u, err := url.Parse(dsn); err == nil {
		if attrs := u.Query().Get("target_session_attrs"); attrs == "read-write" || attrs == "primary" {
			opts = append(opts, stdlib.OptionResetSession(discardReadOnly))
		}
	}
	pool := stdlib.OpenDB(*cc, opts...)
	return postgres.New(postgres.Config{Conn: pool}), pool, nil
}

// WatchReplication makes the connections of cc report what a failover
// leaves behind, which PostgreSQL tells only in passing:
//
//   - A COMMIT whose wait for the synchronous standby was cancelled (by
//     the transaction's statement timeout, or a cancel request when the
//     request's context ended) has committed on this server but maybe not
//     on the standby that a failover promotes. PostgreSQL answers it with
//     success and a WARNING; the connection is marked, and the commit
//     fails with ErrUnavailable ([errCommitNotReplicated]) instead of being
//     acknowledged. The client's retry converges on what did commit.
//   - A server that became a standby refuses writes with 25006
//     read_only_sql_transaction on connections that are still open; such a
//     connection is closed at once, so that the pool reconnects (to the new
//     primary, with target_session_attrs=read-write) instead of reusing it.
//
// The pools that [Driver.Open] creates have it. An application that opens
// its own *gorm.DB calls it on its pgx configuration before opening the
// pool, and keeps any OnNotice and OnPgError of its own (they are called
// too):
//
//	cc, err := pgx.ParseConfig(os.Getenv("DATABASE_URL"))
//	storepg.WatchReplication(cc)
//	gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: stdlib.OpenDB(*cc)}), &gorm.Config{})
func WatchReplication(cc *pgx.ConnConfig) {
	prevNotice, prevErr := cc.OnNotice, cc.OnPgError
	cc.OnNotice = func(pc *pgconn.PgConn, n *pgconn.Notice) {
		if strings.EqualFold(n.Severity, "WARNING") && strings.Contains(n.Message, "synchronous replication") {
			pc.CustomData()[unreplicatedKey] = true
		}
		if prevNotice != nil {
			prevNotice(pc, n)
		}
	}
	cc.OnPgError = func(pc *pgconn.PgConn, e *pgconn.PgError) bool {
		if e.Code == "25006" { // read_only_sql_transaction: a standby
			return false
		}
		return prevErr == nil || prevErr(pc, e)
	}
}

// discardReadOnly drops a pooled connection whose server has become
// read-only since it was opened: a primary fenced for a switchover
// (default_transaction_read_only) or turned into a standby
// (in_hot_standby), as the server reports it (ParameterStatus, PostgreSQL
// 14+). Such a connection would answer every write 25006; dropped, the
// next one goes through target_session_attrs to the writable node. It is
// set only when the DSN asks for a writable node.
func discardReadOnly(_ context.Context, conn *pgx.Conn) error {
	pc := conn.PgConn()
	if pc.ParameterStatus("default_transaction_read_only") == "on" || pc.ParameterStatus("in_hot_standby") == "on" {
		return driver.ErrBadConn
	}
	return nil
}

// unreplicatedKey marks a connection whose last COMMIT PostgreSQL reported
// as committed locally but not confirmed by the synchronous standby.
const unreplicatedKey = "retrysafe/storepg.unreplicated"

// errCommitNotReplicated is the error of a commit that PostgreSQL
// reported as not confirmed by the synchronous standby.
var errCommitNotReplicated = errors.New("storepg: the commit was not confirmed by the synchronous standby (its wait was cancelled); it may be lost by a failover")

// withConnectTimeout adds connect_timeout (whole seconds) unless the DSN
// sets one.
func withConnectTimeout(dsn string, connectTimeout time.Duration) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("%w: %w", store.ErrUnknownDSN, err)
	}
	q := u.Query()
	if q.Get("connect_timeout") == "" {
		q.Set("connect_timeout", strconv.FormatInt(int64(max(time.Second, connectTimeout)/time.Second), 10))
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// Check requires pgx under the handle (transactions are sent as pgx
// batches, and a COMMIT that PostgreSQL answers ROLLBACK must not read as
// success) and a server of at least [MinVersion].
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
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	err = conn.Raw(func(dc any) error {
		_, err := pgxConn(dc)
		return err
	})
	_ = conn.Close()
	if err != nil {
		return err
	}
	var v string
	if err := db.QueryRowContext(ctx, "SHOW server_version_num").Scan(&v); err != nil {
		return err
	}
	n, err := strconv.Atoi(strings.TrimSpace(v))
	if err != nil {
		return fmt.Errorf("storepg: PostgreSQL server_version_num %q: %w", v, err)
	}
	if n < MinVersion {
		return fmt.Errorf("%w: PostgreSQL %d is older than %d, the oldest the framework supports", store.ErrMisconfigured, n, MinVersion)
	}
	return nil
}

// Classify puts connection-class failures first: a server error that
// arrives while connecting (the database is starting up, shutting down, or
// has no connection slot left) is an outage whatever its SQLSTATE.
func (Driver) Classify(err error) error {
	var connectErr *pgconn.ConnectError
	if errors.As(err, &connectErr) || errors.Is(err, pgconn.ErrConnClosed) || pgconn.SafeToRetry(err) ||
		pgconn.Timeout(err) || store.ConnectionLost(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "23505": // unique_violation
		return fmt.Errorf("%w: %w", store.ErrUniqueViolation, err)
	case "22021", // character_not_in_repertoire (a NUL in text)
		"22P05": // untranslatable_character
		return fmt.Errorf("%w: %w", store.ErrUnstorableText, err)
	case "55P03": // lock_not_available (lock_timeout)
		if !strings.Contains(pgErr.Where, " tuple (") {
			// Not a row's lock ("while locking tuple (0,1) in relation
			// …", "while inserting index tuple …"): a table's.
			return fmt.Errorf("%w: %w: %w", store.ErrLockTimeout, store.ErrBusy, err)
		}
		return fmt.Errorf("%w: %w", store.ErrLockTimeout, err)
	case "40001", // serialization_failure
		"40P01": // deadlock_detected
		return fmt.Errorf("%w: %w: %w", store.ErrLockTimeout, store.ErrRolledBack, err)
	case "57P01", // admin_shutdown
		"57P02", // crash_shutdown
		"57P03", // cannot_connect_now (starting up, shutting down, recovery)
		"57P04", // database_dropped
		"57P05", // idle_session_timeout
		"57014", // query_canceled (statement_timeout, a cancel request)
		"25P03", // idle_in_transaction_session_timeout
		"25006", // read_only_sql_transaction (a standby, after a failover)
		"58000", // system_error
		"58030": // io_error
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	// Whole classes: 08 connection_exception, 53 insufficient_resources
	// (53300 too_many_connections, 53100 disk_full).
	if strings.HasPrefix(pgErr.Code, "08") || strings.HasPrefix(pgErr.Code, "53") {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// Begin queues the begin of a transaction with the lock and statement
// timeouts applied to it alone (and an idle-in-transaction timeout of six
// statement timeouts, so a stalled process cannot hold its locks
// forever): it is sent with the transaction's first statement. SET LOCAL
// ends with the transaction, so a pooled server connection (PgBouncer)
// keeps nothing.
func (Driver) Begin(_ context.Context, conn *sql.Conn, opts store.TxOptions) (store.Tx, error) {
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	begin := []queued{{sql: "BEGIN"}, {sql: "SELECT set_config('lock_timeout', '" + ms(opts.LockTimeout) +
		"', true), set_config('statement_timeout', '" + ms(opts.StatementTimeout) +
		"', true), set_config('idle_in_transaction_session_timeout', '" + ms(6*opts.StatementTimeout) + "', true)"}}
	return &pinnedTx{conn: conn, queue: begin, beginLen: len(begin)}, nil
}

// pgxConn is the pgx connection under a database/sql driver connection of
// PostgreSQL; [Driver.Check] refuses any other driver.
func pgxConn(dc any) (*pgx.Conn, error) {
	pc, ok := dc.(interface{ Conn() *pgx.Conn })
	if !ok {
		return nil, fmt.Errorf("%w: the PostgreSQL driver connection %T is not pgx (use gorm.io/driver/postgres or pgx's stdlib)", store.ErrMisconfigured, dc)
	}
	c := pc.Conn()
	registerTypes(c)
	return c, nil
}

// typesKey marks a connection whose type map [registerTypes] has taught.
const typesKey = "retrysafe/storepg.types"

// registerTypes teaches c's type map, once per connection, to send a
// github.com/google/uuid UUID (the ID of every resource) as the 16 bytes
// it is. Left to itself, pgx sends it through its driver.Valuer: the UUID
// becomes a string, which pgx cannot put in the binary format of a uuid
// parameter, so it builds an error message, parses the string back and
// encodes that, for every UUID of every statement.
func registerTypes(c *pgx.Conn) {
	data := c.PgConn().CustomData()
	if _, done := data[typesKey]; done {
		return
	}
	m := c.TypeMap()
	m.TryWrapEncodePlanFuncs = append([]pgtype.TryWrapEncodePlanFunc{tryWrapUUIDEncodePlan}, m.TryWrapEncodePlanFuncs...)
	// Also forgets the plans made before the line above.
	m.RegisterDefaultPgType(uuid.UUID{}, "uuid")
	data[typesKey] = true
}

func tryWrapUUIDEncodePlan(value any) (pgtype.WrappedEncodePlanNextSetter, any, bool) {
	if u, ok := value.(uuid.UUID); ok {
		return &uuidEncodePlan{}, [16]byte(u), true
	}
	return nil, nil, false
}

// uuidEncodePlan encodes a uuid.UUID as its [16]byte. For a parameter that
// is not a uuid (a text column) pgx finds no plan for the bytes and goes
// on to the Valuer's string, as before.
type uuidEncodePlan struct{ next pgtype.EncodePlan }

func (p *uuidEncodePlan) SetNext(next pgtype.EncodePlan) { p.next = next }

func (p *uuidEncodePlan) Encode(value any, buf []byte) ([]byte, error) {
	return p.next.Encode([16]byte(value.(uuid.UUID)), buf)
}
