package store

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// What each dialect sets per transaction, checks at start-up and how it
// commits: the half of [Dialect] that [DB.Write] and [New] use.

// MinPostgresVersion is the oldest PostgreSQL [New] accepts (as
// server_version_num): the framework's SQL needs INSERT … ON CONFLICT …
// RETURNING, FOR UPDATE SKIP LOCKED and SET LOCAL, and nothing older than
// 12 is tested.
const MinPostgresVersion = 120000

// begin starts a transaction with the lock and statement timeouts applied
// to it alone (and an idle-in-transaction timeout of six statement
// timeouts, so a stalled process cannot hold its locks forever). SET LOCAL
// ends with the transaction, so a pooled server connection (PgBouncer)
// keeps nothing. The two statements are not sent on their own: [DB.Write]
// pipelines them with the transaction's first statement (see pinnedTx).
func (postgresDialect) begin(lockTimeout, statementTimeout time.Duration) []string {
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	return []string{"BEGIN", "SELECT set_config('lock_timeout', '" + ms(lockTimeout) +
		"', true), set_config('statement_timeout', '" + ms(statementTimeout) +
		"', true), set_config('idle_in_transaction_session_timeout', '" + ms(6*statementTimeout) + "', true)"}
}

// pipelined: on PostgreSQL (through pgx, which [New] requires) the begin
// and the writes queued by [Later] travel with the next statement.
func (postgresDialect) pipelined() bool { return true }

func (postgresDialect) check(ctx context.Context, db *sql.DB) error {
	// Transactions are sent as pgx batches, and a COMMIT that PostgreSQL
	// answers ROLLBACK must not read as success: both need pgx (what
	// gorm.io/driver/postgres uses).
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
		return fmt.Errorf("store: PostgreSQL server_version_num %q: %w", v, err)
	}
	if n < MinPostgresVersion {
		return fmt.Errorf("%w: PostgreSQL %d is older than %d, the oldest the framework supports", ErrMisconfigured, n, MinPostgresVersion)
	}
	return nil
}

// pipelined: SQLite runs in the process; there is no round trip to save.
func (sqliteDialect) pipelined() bool { return false }

// sqliteBusySlice is how long one try of BEGIN IMMEDIATE waits for another
// writer. SQLite's busy wait does not notice an interrupt, so [DB.Write]
// waits in slices and checks the context between them: a request whose
// client went away, or whose deadline passed, stops waiting within a slice
// instead of holding its connection for the whole lock timeout.
const sqliteBusySlice = 20 * time.Millisecond

// begin takes the write lock up front (BEGIN IMMEDIATE), waiting for
// another writer in slices of [sqliteBusySlice] ([DB.Write] repeats a busy
// begin until the lock timeout), then sets the connection's busy timeout
// to the lock timeout, which bounds the commit's wait. The busy timeout
// stays on the connection; it is harmless to the application's own use of
// it. SQLite has no statement timeout: the context (the request deadline)
// interrupts a statement.
func (sqliteDialect) begin(lockTimeout, _ time.Duration) []string {
	ms := func(d time.Duration) string { return strconv.FormatInt(max(d.Milliseconds(), 1), 10) }
	return []string{
		"PRAGMA busy_timeout = " + ms(min(lockTimeout, sqliteBusySlice)),
		"BEGIN IMMEDIATE",
		"PRAGMA busy_timeout = " + ms(lockTimeout),
	}
}

// check requires WAL: in the rollback-journal modes a reader blocks the
// writer, so replays and reads would fail with "database is locked" under
// load. WAL is a property of the database file, which the framework does
// not change behind the application's back.
func (sqliteDialect) check(ctx context.Context, db *sql.DB) error {
	var mode string
	if err := db.QueryRowContext(ctx, "PRAGMA journal_mode").Scan(&mode); err != nil {
		return err
	}
	if !strings.EqualFold(mode, "wal") {
		return fmt.Errorf("%w: the SQLite database is in journal_mode %q, not WAL: open it with _pragma=journal_mode(WAL) in the DSN or run PRAGMA journal_mode=WAL once", ErrMisconfigured, mode)
	}
	return nil
}

// pgxConn is the pgx connection under a database/sql driver connection of
// PostgreSQL; [New] refuses any other driver.
func pgxConn(dc any) (*pgx.Conn, error) {
	pc, ok := dc.(interface{ Conn() *pgx.Conn })
	if !ok {
		return nil, fmt.Errorf("%w: the PostgreSQL driver connection %T is not pgx (use gorm.io/driver/postgres or pgx's stdlib)", ErrMisconfigured, dc)
	}
	c := pc.Conn()
	registerTypes(c)
	return c, nil
}

// typesKey marks a connection whose type map [registerTypes] has taught.
const typesKey = "retrysafe/store.types"

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
