package storepg

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// errCommitRolledBack is returned when PostgreSQL answered COMMIT with
// ROLLBACK: a statement of the transaction had failed and its error was
// ignored, so nothing was committed.
var errCommitRolledBack = errors.New("storepg: the transaction was rolled back at commit (a statement in it had failed)")

// pinnedTx is the connection of one store.DB.Write transaction on
// PostgreSQL ([store.Tx]). It is a pointer, as gorm checks committers for
// nil.
//
// It pipelines ([pipeline.Tx]): the begin and the writes queued by Later
// wait in queue and go out in one pgx batch (one network write, one round
// trip) with the next statement, or with the COMMIT. A create that queues
// its row, its child rows and an outbox event is then one round trip
// instead of five. Statements still run in the order fn issued them: a
// query sends the queue before it.
type pinnedTx struct {
	conn *sql.Conn
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
	// scan, when set, is the dry-run query (pipeline.Find) whose rows this
	// statement returns: they are scanned into its destination.
	scan *gorm.DB
}

var (
	_ store.Tx    = (*pinnedTx)(nil)
	_ pipeline.Tx = (*pinnedTx)(nil)
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
	if len(args) == 0 && (strings.HasPrefix(query, "SAVEPOINT ") || strings.HasPrefix(query, "RELEASE SAVEPOINT ")) {
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
		if begins > 0 {
			// A mark left by a statement before this transaction is not its own.
			delete(c.PgConn().CustomData(), unreplicatedKey)
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

// Finish commits: the queue and COMMIT in one round trip (nothing at all
// when fn wrote nothing: BEGIN was never sent), and PostgreSQL's answer
// ROLLBACK (a failed statement whose error fn ignored) is an error, as
// database/sql's Tx reports it.
func (p *pinnedTx) Finish(ctx context.Context) error {
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
	if err == nil && p.unreplicated() {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, errCommitNotReplicated)
	}
	return err
}

// unreplicated reports, once, whether PostgreSQL warned on the
// transaction's connection that its commit was not confirmed by the
// synchronous standby ([WatchReplication]).
func (p *pinnedTx) unreplicated() (marked bool) {
	_ = p.conn.Raw(func(dc any) error {
		c, err := pgxConn(dc)
		if err != nil {
			return err
		}
		data := c.PgConn().CustomData()
		marked = data[unreplicatedKey] == true
		delete(data, unreplicatedKey)
		return nil
	})
	return marked
}

// onlyBegin reports whether nothing but the begin was ever queued: the
// transaction has not started on the server and has nothing to commit.
func (p *pinnedTx) onlyBegin() bool { return !p.sent && len(p.queue) == p.beginLen }

// Abort rolls the transaction back, dropping what is queued. When the
// ROLLBACK fails the connection's state is unknown, so it is closed rather
// than returned to the pool.
func (p *pinnedTx) Abort(ctx context.Context) {
	begun := p.sent
	p.queue = nil
	if !begun {
		return
	}
	if _, err := p.conn.ExecContext(context.WithoutCancel(ctx), "ROLLBACK"); err != nil {
		_ = p.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}

type rowsAffected int64

func (rowsAffected) LastInsertId() (int64, error) {
	return 0, errors.New("storepg: LastInsertId is not supported by PostgreSQL")
}
func (n rowsAffected) RowsAffected() (int64, error) { return int64(n), nil }

// Queue implements [pipeline.Tx]: sql goes with the next round trip.
func (p *pinnedTx) Queue(sql string, args []any, wrap func(error) error) {
	p.queue = append(p.queue, queued{sql: sql, args: args, wrap: wrap})
}

// Waiting implements [pipeline.Tx].
func (p *pinnedTx) Waiting() bool { return len(p.queue) > 0 && p.failed == nil }

// Query implements [pipeline.Tx]: the queue and the query in one round
// trip, the query's rows scanned into dest by gorm.
func (p *pinnedTx) Query(ctx context.Context, sql string, args []any, dest *gorm.DB) error {
	_, err := p.roundTrip(ctx, append(p.queue, queued{sql: sql, args: args, scan: dest}))
	return err
}

// Failed is the first error of a batch, which aborted the transaction.
func (p *pinnedTx) Failed() error { return p.failed }

// Commit fails: Write commits when fn returns nil.
func (*pinnedTx) Commit() error { return store.ErrOwnedByWrite }

// Rollback fails: Write rolls back when fn returns an error.
func (*pinnedTx) Rollback() error { return store.ErrOwnedByWrite }

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
