package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// errCommitRolledBack is returned when PostgreSQL answered COMMIT with
// ROLLBACK: a statement of the transaction had failed and its error was
// ignored, so nothing was committed.
var errCommitRolledBack = errors.New("store: the transaction was rolled back at commit (a statement in it had failed)")

// Write runs fn in one write transaction, commits when fn returns nil and
// rolls back otherwise. Errors are passed through [DB.Classify]. Pass the
// *gorm.DB that fn receives to every transactional twin (…Tx) so that its
// writes commit together.
//
// The transaction is begun on a connection of the application's pool with
// what the framework needs set for this transaction only: on PostgreSQL
// BEGIN and SET LOCAL lock_timeout, sent with the first statement (see
// pinnedTx; it also holds behind PgBouncer in transaction pooling), on
// SQLite the connection's busy timeout and BEGIN IMMEDIATE (the write lock
// is taken up front, so two writers never deadlock on a lock upgrade). fn's *gorm.DB is a gorm
// transaction as far as gorm is concerned: a nested tx.Transaction becomes
// a savepoint, and gorm's own default transaction is skipped.
func (db *DB) Write(ctx context.Context, fn func(tx *gorm.DB) error) error {
	return db.Classify(db.write(ctx, fn))
}

func (db *DB) write(ctx context.Context, fn func(tx *gorm.DB) error) (err error) {
	ctx, span := db.tracer.Start(ctx, "store.write", trace.WithAttributes(attribute.String("db.system.name", db.Dialect.Name())))
	defer func() { endSpan(span, err) }()
	sqlDB, err := db.Gorm.DB()
	if err != nil {
		return err
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	lockTimeout := db.lockTimeout
	if lockTimeout == 0 {
		lockTimeout = time.Second
	}
	statementTimeout := db.statementTimeout
	if statementTimeout == 0 {
		statementTimeout = 5 * time.Second
	}
	pt := &pinnedTx{conn: conn, pipelined: db.Dialect.pipelined()}
	begin := db.Dialect.begin(lockTimeout, statementTimeout)
	if pt.pipelined {
		// Sent with the transaction's first statement.
		for _, stmt := range begin {
			pt.queue = append(pt.queue, queued{sql: stmt})
		}
		pt.beginLen = len(begin)
	} else {
		for _, stmt := range begin {
			if err := db.execBegin(ctx, conn, stmt, lockTimeout); err != nil {
				// A failed begin may have left a transaction open or none
				// (SQLite: BEGIN IMMEDIATE was busy): roll back whatever
				// there is, and keep the connection either way.
				_, _ = conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK")
				return err
			}
		}
	}
	// A context that ended while a statement was being sent may have made
	// the driver skip it and report success (the pure-Go SQLite driver
	// does): from here on, an ended context means nothing commits.
	if err := ctx.Err(); err != nil {
		pt.abort(ctx)
		return err
	}
	tx := db.Gorm.Session(&gorm.Session{NewDB: true, Context: ctx, SkipDefaultTransaction: true})
	tx.Statement.ConnPool = pt
	panicked := true
	defer func() {
		if panicked {
			pt.abort(ctx)
		}
	}()
	err = fn(tx)
	panicked = false
	if err == nil {
		err = tx.Error
	}
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		pt.abort(ctx)
		return err
	}
	if err := pt.commit(ctx); err != nil {
		pt.abort(ctx)
		return err
	}
	return nil
}

// execBegin sends one statement of a begin that is not pipelined. A
// statement the database refuses as busy (SQLite: another writer holds the
// lock) is sent again until lockTimeout has passed, and not once the
// context has ended: then the context's error is returned, so that a
// client that went away is not taken for a lock timeout.
func (db *DB) execBegin(ctx context.Context, conn *sql.Conn, stmt string, lockTimeout time.Duration) error {
	until := time.Now().Add(lockTimeout)
	for {
		_, err := conn.ExecContext(ctx, stmt)
		if err == nil {
			return nil
		}
		if busy, _ := db.Dialect.classify(err); !busy {
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

// pinnedTx is the connection of one [DB.Write] transaction as gorm sees
// it. It is a gorm.TxCommitter, so that gorm treats it as a transaction
// (nested Transaction calls become savepoints), and not a TxBeginner, so
// that gorm never begins a transaction of its own on it. Commit and
// Rollback belong to Write: called by fn they fail. It is a pointer, as
// gorm checks committers for nil.
//
// On PostgreSQL it pipelines: the begin and the writes queued by [Later]
// wait in queue and go out in one pgx batch (one network write, one round
// trip) with the next statement, or with the COMMIT. A create that queues
// its row, its child rows and an outbox event is then one round trip
// instead of five. Statements still run in the order fn issued them: a
// query sends the queue before it.
type pinnedTx struct {
	conn      *sql.Conn
	pipelined bool
	// beginLen is how many statements of the queue begin the transaction;
	// sent is set once anything was sent (BEGIN goes first).
	beginLen int
	sent     bool
	queue    []queued
	// failed is the first error of a batch: the transaction is aborted on
	// the server, every later statement fails with it and Write returns it.
	failed error
}

// queued is one statement waiting for the next round trip; wrap, when set,
// is applied to its error.
type queued struct {
	sql  string
	args []any
	wrap func(error) error
	// scan, when set, is the dry-run query (store.Find) whose rows this
	// statement returns: they are scanned into its destination.
	scan *gorm.DB
}

var (
	_ gorm.ConnPool    = (*pinnedTx)(nil)
	_ gorm.TxCommitter = (*pinnedTx)(nil)
)

func (p *pinnedTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	return p.conn.PrepareContext(ctx, query)
}

// ExecContext sends the queue and the statement in one round trip.
func (p *pinnedTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if p.failed != nil {
		return nil, p.failed
	}
	if p.pipelined && len(args) == 0 && (strings.HasPrefix(query, "SAVEPOINT ") || strings.HasPrefix(query, "RELEASE SAVEPOINT ")) {
		// gorm's SavePoint (a nested Transaction, a local operation that
		// declares rejections) needs no answer: it goes with the next
		// statement, which reports its error.
		p.queue = append(p.queue, queued{sql: query})
		return rowsAffected(0), nil
	}
	if len(p.queue) == 0 {
		return p.conn.ExecContext(ctx, query, args...)
	}
	tag, err := p.send(ctx, queued{sql: query, args: args})
	if err != nil {
		return nil, err
	}
	return rowsAffected(tag.RowsAffected()), nil
}

func (p *pinnedTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if err := p.flush(ctx); err != nil {
		return nil, err
	}
	return p.conn.QueryContext(ctx, query, args...)
}

// QueryRowContext cannot carry an error of its own in *sql.Row: after a
// failed batch the query is not sent (its context is already cancelled),
// and Write returns the batch's error.
func (p *pinnedTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if p.flush(ctx) != nil {
		dead, cancel := context.WithCancel(ctx)
		cancel()
		ctx = dead
	}
	return p.conn.QueryRowContext(ctx, query, args...)
}

// flush sends what is queued.
func (p *pinnedTx) flush(ctx context.Context) error {
	if p.failed != nil || len(p.queue) == 0 {
		return p.failed
	}
	_, err := p.send(ctx)
	return err
}

// send sends the queue and then last as one pgx batch, and returns the
// command tag of the batch's last statement or the first error (wrapped by
// its statement's wrap). After an error PostgreSQL skips the rest of the
// batch and the transaction is aborted; Write rolls it back.
func (p *pinnedTx) send(ctx context.Context, last ...queued) (pgconn.CommandTag, error) {
	return p.roundTrip(ctx, append(p.queue, last...))
}

// roundTrip sends items (the queue, which it empties, and what follows)
// as one pgx batch on the transaction's connection and reads the results
// ([readAll]). A failure is kept in p.failed.
//
// One exception to one round trip: pgx prepares a statement it has not
// prepared on this connection in a round trip of its own before the batch,
// and when the batch starts the transaction that prepare runs outside it,
// where the transaction's lock timeout does not hold yet (parsing an INSERT
// waits for a table locked by DDL). So when the begin is in items and a
// statement after it may not be prepared yet, the begin goes out first,
// alone, and the rest follows inside the transaction.
func (p *pinnedTx) roundTrip(ctx context.Context, items []queued) (pgconn.CommandTag, error) {
	begins := 0
	if !p.sent {
		begins = p.beginLen
	}
	p.queue, p.sent = nil, true
	var tag pgconn.CommandTag
	err := p.conn.Raw(func(dc any) error {
		c, err := pgxConn(dc)
		if err != nil {
			return err
		}
		if begins > 0 && begins < len(items) && !prepared(c, items[begins:]) {
			if _, err := runBatch(ctx, c, items[:begins]); err != nil {
				return err
			}
			items = items[begins:]
		}
		tag, err = runBatch(ctx, c, items)
		return err
	})
	if err != nil {
		p.failed = err
	}
	return tag, err
}

// readAll reads the results of items in order, scanning the rows of a
// query into its destination, and returns the command tag of the last or
// the first error (wrapped by its statement's wrap).
func readAll(br pgx.BatchResults, items []queued) (pgconn.CommandTag, error) {
	var tag pgconn.CommandTag
	for _, it := range items {
		var err error
		if it.scan != nil {
			err = scanInto(br, it.scan)
		} else {
			tag, err = br.Exec()
		}
		if err != nil {
			if it.wrap != nil {
				err = it.wrap(err)
			}
			return tag, err
		}
	}
	return tag, nil
}

// runBatch sends items as one batch and reads the results ([readAll]).
func runBatch(ctx context.Context, c *pgx.Conn, items []queued) (pgconn.CommandTag, error) {
	br := c.SendBatch(ctx, batchOf(items))
	tag, err := readAll(br, items)
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		markPrepared(c, items)
	}
	return tag, err
}

// The statements this package has sent in batches on a connection, kept
// with the connection (pgconn's CustomData). pgx keeps up to 512 prepared
// statements per connection (LRU) by default; the set is forgotten at 256,
// so that a statement it holds is almost surely still prepared.
const (
	preparedKey   = "retrysafe/store.prepared"
	execModeKey   = "retrysafe/store.exec_mode"
	preparedLimit = 256
)

// prepared reports whether pgx will send items without preparing one
// first: its exec mode prepares nothing, or every statement was sent on c
// before.
func prepared(c *pgx.Conn, items []queued) bool {
	data := c.PgConn().CustomData()
	mode, ok := data[execModeKey].(pgx.QueryExecMode)
	if !ok {
		mode = c.Config().DefaultQueryExecMode
		data[execModeKey] = mode
	}
	switch mode {
	case pgx.QueryExecModeSimpleProtocol, pgx.QueryExecModeExec:
		return true
	case pgx.QueryExecModeDescribeExec:
		return false
	}
	known, _ := data[preparedKey].(map[string]struct{})
	for _, it := range items {
		if _, ok := known[it.sql]; !ok {
			return false
		}
	}
	return true
}

func markPrepared(c *pgx.Conn, items []queued) {
	data := c.PgConn().CustomData()
	known, _ := data[preparedKey].(map[string]struct{})
	if known == nil || len(known) >= preparedLimit {
		known = make(map[string]struct{}, 16)
		data[preparedKey] = known
	}
	for _, it := range items {
		known[it.sql] = struct{}{}
	}
}

// commit commits: on PostgreSQL the queue and COMMIT in one round trip
// (nothing at all when fn wrote nothing: BEGIN was never sent), and
// PostgreSQL's answer ROLLBACK (a failed statement whose error fn ignored)
// is an error, as database/sql's Tx reports it. SQLite commits without the
// caller's cancellation: the pure-Go driver skips a statement whose
// context ends as it starts and reports success, which would leave the
// transaction open on a pooled connection (write applied 0 times,
// answered once); the busy timeout still bounds it.
func (p *pinnedTx) commit(ctx context.Context) error {
	if !p.pipelined {
		_, err := p.conn.ExecContext(context.WithoutCancel(ctx), "COMMIT")
		return err
	}
	if p.failed != nil {
		return p.failed
	}
	if p.onlyBegin() {
		p.queue = nil
		return nil
	}
	tag, err := p.send(ctx, queued{sql: "COMMIT"})
	if err == nil && tag.String() == "ROLLBACK" {
		return errCommitRolledBack
	}
	return err
}

// onlyBegin reports whether nothing but the begin was ever queued: the
// transaction has not started on the server and has nothing to commit.
func (p *pinnedTx) onlyBegin() bool { return !p.sent && len(p.queue) == p.beginLen }

// abort rolls the transaction back, dropping what is queued. When the
// ROLLBACK fails the connection's state is unknown, so it is closed rather
// than returned to the pool.
func (p *pinnedTx) abort(ctx context.Context) {
	begun := p.sent
	p.queue = nil
	if p.pipelined && !begun {
		return
	}
	if _, err := p.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil && !noTransaction(err) {
		_ = p.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

// noTransaction reports SQLite's answer to a ROLLBACK with no transaction
// open: a statement interrupted by its cancelled context rolls its
// transaction back itself, and a cancelled BEGIN may have begun none. The
// connection is then in a known state and stays in the pool. Closing it
// there and then would also race the pure-Go driver's interrupt goroutine,
// which may still be reading the connection unlocked (the race detector
// caught it). PostgreSQL answers such a ROLLBACK with a warning, not an
// error.
func noTransaction(err error) bool {
	return strings.Contains(err.Error(), "no transaction is active")
}

type rowsAffected int64

func (rowsAffected) LastInsertId() (int64, error) {
	return 0, errors.New("store: LastInsertId is not supported by PostgreSQL")
}
func (n rowsAffected) RowsAffected() (int64, error) { return int64(n), nil }

var errOwnedByWrite = errors.New("store: the transaction of DB.Write is committed or rolled back by Write, from fn's return value")

// Commit fails: Write commits when fn returns nil.
func (*pinnedTx) Commit() error { return errOwnedByWrite }

// Rollback fails: Write rolls back when fn returns an error.
func (*pinnedTx) Rollback() error { return errOwnedByWrite }

// Later queues the write that build makes on tx for the next round trip of
// tx's transaction. When tx belongs to a [DB.Write] transaction on
// PostgreSQL, the statement is sent together with the transaction's next
// statement or with its COMMIT, saving a round trip; its error (passed
// through wrap, when wrap is set) is then reported by that statement or by
// Write, and the transaction does not commit. Anywhere else (SQLite, or a
// transaction Write did not open) the write runs now and its error is
// returned, wrapped.
//
// Use it only for a write whose answer nothing needs: build must not need
// its rows affected or returned columns. A statement that would return
// columns into the model (gorm's RETURNING for database defaults), and a
// write of a model with gorm hooks (BeforeCreate, AfterSave, …), run now.
// build receives a dry-run session of tx and returns it with one statement
// built, for example
//
//	store.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Table("items").Create(&items) }, nil)
func Later(tx *gorm.DB, build func(*gorm.DB) *gorm.DB, wrap func(error) error) error {
	if wrap == nil {
		wrap = func(err error) error { return err }
	}
	p, ok := tx.Statement.ConnPool.(*pinnedTx)
	if !ok || !p.pipelined {
		if err := build(tx).Error; err != nil {
			return wrap(err)
		}
		return nil
	}
	// Built without gorm's model hooks: a hook's own statements would be
	// dry too. A model with hooks, or a statement returning columns into
	// the model, runs now, hooks included.
	dry := build(tx.Session(&gorm.Session{DryRun: true, SkipHooks: true}))
	if dry.Error != nil {
		return wrap(dry.Error)
	}
	_, returning := dry.Statement.Clauses["RETURNING"]
	if returning && dry.Statement.ReflectValue.IsValid() || hasHooks(dry.Statement.Schema) {
		if err := build(tx).Error; err != nil {
			return wrap(err)
		}
		return nil
	}
	if dry.Statement.SQL.Len() == 0 {
		return nil
	}
	p.queue = append(p.queue, queued{sql: dry.Statement.SQL.String(), args: dry.Statement.Vars, wrap: wrap})
	return nil
}

// Pipelined reports whether tx is a [DB.Write] transaction on PostgreSQL,
// whose writes [Later] and [LaterSQL] queue for the next round trip.
func Pipelined(tx *gorm.DB) bool {
	p, ok := tx.Statement.ConnPool.(*pinnedTx)
	return ok && p.pipelined
}

// LaterSQL is [Later] for a statement its caller spells itself, in
// PostgreSQL's SQL with placeholders $1, $2, …, so that a hot write costs
// no gorm statement: it queues sql and args on tx, a transaction for which
// [Pipelined] reports true, and its error (passed through wrap, when set)
// is reported by the transaction's next statement or by Write. Anywhere
// else it queues nothing and returns an error.
func LaterSQL(tx *gorm.DB, sql string, args []any, wrap func(error) error) error {
	p, ok := tx.Statement.ConnPool.(*pinnedTx)
	if !ok || !p.pipelined {
		return errors.New("store: LaterSQL needs a DB.Write transaction on PostgreSQL")
	}
	p.queue = append(p.queue, queued{sql: sql, args: args, wrap: wrap})
	return nil
}

// Exec runs sql, a statement with gorm's ? placeholders, with args on tx
// and returns the rows it affected, as tx.Exec(sql, args...) would. In a
// transaction for which [Pipelined] reports true it builds no gorm
// statement: the placeholders are numbered ([NumberPlaceholders]) and the
// statement goes out with what is queued before it (one round trip), and
// it is reported to tx's gorm logger as gorm's Exec would report it. Use it
// for a hot write whose answer is needed. Arguments that gorm would expand
// (a slice for IN ?, a map of named arguments) send it through gorm.
func Exec(tx *gorm.DB, sql string, args ...any) (int64, error) {
	p, ok := tx.Statement.ConnPool.(*pinnedTx)
	if !ok || !p.pipelined || !plainArgs(args) {
		res := tx.Exec(sql, args...)
		return res.RowsAffected, res.Error
	}
	sql = NumberPlaceholders(sql)
	ctx := tx.Statement.Context
	start := time.Now()
	var n int64
	res, err := p.ExecContext(ctx, sql, args...)
	if err == nil {
		n, err = res.RowsAffected()
	}
	tx.Logger.Trace(ctx, start, func() (string, int64) { return sql, n }, err)
	return n, err
}

// LaterExec queues sql, a statement with gorm's ? placeholders, with args
// on tx, as Later(tx, func(db) { return db.Exec(sql, args...) }, wrap)
// would, but in a transaction for which [Pipelined] reports true without
// building a gorm statement ([LaterSQL]).
func LaterExec(tx *gorm.DB, sql string, args []any, wrap func(error) error) error {
	if Pipelined(tx) && plainArgs(args) {
		return LaterSQL(tx, NumberPlaceholders(sql), args, wrap)
	}
	return Later(tx, func(db *gorm.DB) *gorm.DB { return db.Exec(sql, args...) }, wrap)
}

// plainArgs reports whether every argument goes to the driver as it is:
// gorm expands a slice (other than bytes or a driver.Valuer) into a list,
// and takes a map as named arguments.
func plainArgs(args []any) bool {
	for _, a := range args {
		switch a.(type) {
		case nil, []byte, driver.Valuer:
			continue
		}
		switch reflect.ValueOf(a).Kind() {
		case reflect.Slice, reflect.Array, reflect.Map:
			return false
		}
	}
	return true
}

// NumberPlaceholders spells sql's ? placeholders as PostgreSQL's $1, $2,
// … for [LaterSQL]; sql must have no ? of another kind (in a literal or
// an operator).
func NumberPlaceholders(sql string) string {
	var b strings.Builder
	n := 0
	for _, r := range sql {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// Find runs the query that build makes on tx (a gorm Find, Take, First or
// Raw(…).Find) and scans its rows into build's destination, as build(tx)
// would. When tx belongs to a [DB.Write] transaction on PostgreSQL and
// writes are waiting to be sent (the begin, writes queued by [Later]), they
// go out in the same round trip as the query: a transaction whose first
// statement must return rows (INSERT … RETURNING) costs no round trip for
// its BEGIN. The result (Error, RowsAffected) is returned.
func Find(tx *gorm.DB, build func(*gorm.DB) *gorm.DB) *gorm.DB {
	p, ok := tx.Statement.ConnPool.(*pinnedTx)
	if !ok || !p.pipelined || len(p.queue) == 0 || p.failed != nil {
		return build(tx)
	}
	dry := build(tx.Session(&gorm.Session{DryRun: true, SkipHooks: true}))
	if dry.Error != nil || dry.Statement.SQL.Len() == 0 || hasHooks(dry.Statement.Schema) {
		return build(tx)
	}
	dry.Error = nil
	if _, err := p.roundTrip(tx.Statement.Context, append(p.queue,
		queued{sql: dry.Statement.SQL.String(), args: dry.Statement.Vars, scan: dry})); err != nil {
		dry.Error = err
	}
	return dry
}

func batchOf(items []queued) *pgx.Batch {
	b := &pgx.Batch{}
	for _, it := range items {
		b.Queue(it.sql, it.args...)
	}
	return b
}

// scanInto reads the next result of br into the destination of the
// dry-run query q, as gorm would, and sets q's Error and RowsAffected.
func scanInto(br pgx.BatchResults, q *gorm.DB) error {
	rows, err := br.Query()
	if err != nil {
		return err
	}
	gorm.Scan(gormRows{rows}, q, 0)
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	if q.Error != nil && !errors.Is(q.Error, gorm.ErrRecordNotFound) {
		return q.Error
	}
	return nil
}

// hasHooks reports whether gorm runs model hooks on a write of s.
func hasHooks(s *schema.Schema) bool {
	return s != nil && (s.BeforeCreate || s.AfterCreate || s.BeforeSave || s.AfterSave ||
		s.BeforeUpdate || s.AfterUpdate || s.BeforeDelete || s.AfterDelete)
}
