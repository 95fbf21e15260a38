package storemysql

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-sql-driver/mysql"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// batchTx is the connection of one store.DB.Write transaction on a pool
// that takes several statements in one COM_QUERY with its placeholders
// filled in by go-sql-driver (multiStatements=true and
// interpolateParams=true, which [Driver.Check] found): it pipelines
// ([pipeline.Tx]) as storepg's transaction does. The begin (beginSQL,
// START TRANSACTION) and the writes queued by pipeline.Later wait in the
// queue and go out as one multi-statement query with the next statement,
// or with the COMMIT and the session's restore; a transaction of which
// nothing went out before its COMMIT goes whole as one statement that
// sets what the begin would for itself alone ([batchTx.whole]): a create
// that queues its row, its child rows and its outbox event is one round
// trip instead of nine, and one statement, and a transaction that wrote
// nothing sends nothing at all.
//
// The statements are the ones [tx] sends one at a time, in the same order.
// MySQL stops a multi-statement query at its first failing statement and
// reports that statement's error alone, not which one it was: each
// statement whose error must be told apart is preceded by SET
// @retrysafe_at = mark, or carries the assignment itself (a SET, and a
// statement that holds [markHere]), or has it assigned by the begin's
// SET (the first statement after START TRANSACTION, see joinBatch), and
// a failure the server reported reads @retrysafe_at back (a round trip
// on that path only). A mark that is not this batch's (an inline one
// that did not run, as the first statement of its query) reads as
// unknown. The COMMIT carries no mark:
// the same read asks whether the session is still in its transaction
// (@@in_transaction), and a failure read at a statement before the
// COMMIT when it is not (the COMMIT failed, or the statement ended the
// transaction itself, as DDL's implicit commit does) reads as unknown,
// but for a deadlock, which rolled all of it back. Any other failure (the
// context ended, the connection broke) leaves what ran unknown: a COMMIT
// in it may have committed, and the connection is discarded.
type batchTx struct {
	conn *sql.Conn
	// lockTimeout and statementTimeout are the transaction's settings.
	lockTimeout, statementTimeout time.Duration
	// sent is set once anything was sent: the transaction has begun on
	// the server.
	sent bool
	// saved is set once the begin's SET list was sent: the session holds
	// the transaction's settings until restoreSQL runs.
	saved bool
	queue []queued
	// failed is the error of a queued statement: the statements after it
	// in its query did not run, so the transaction must not commit.
	failed error
}

// queued is one statement waiting for the next round trip, with ?
// placeholders; wrap, when set, is applied to its error.
type queued struct {
	sql  string
	args []any
	wrap func(error) error
	// mark says which statement an error belongs to: markNone for a
	// statement whose error is the one before it's (the begin's START).
	mark mark
	// rows: the statement may return rows (RETURNING, a SELECT), which
	// a query sent after it in the same round trip would read as its own.
	rows bool
}

type mark uint8

const (
	markEach mark = iota
	markNone
	// markCommit is the COMMIT's: no mark of its own (failedAt).
	markCommit
	// markBegin is the begin's SET list (beginSQL), before START
	// TRANSACTION: it assigns the mark of the first statement after the
	// START when that one would need a SET of its own (joinBatch).
	markBegin
)

var (
	_ store.Tx    = (*batchTx)(nil)
	_ pipeline.Tx = (*batchTx)(nil)
)

// beginBatch queues the begin of a write transaction: nothing is sent.
func beginBatch(conn *sql.Conn, lockTimeout, statementTimeout time.Duration) *batchTx {
	return &batchTx{conn: conn, lockTimeout: lockTimeout, statementTimeout: statementTimeout, queue: []queued{
		{sql: beginSQL(lockTimeout, statementTimeout), mark: markBegin},
		{sql: "START TRANSACTION", mark: markNone},
	}}
}

// roundTrip sends items (the queue, which it empties, then what follows)
// as one query and returns the result of the last, or the error of the
// statement that failed, wrapped by its wrap. With rows, the last item
// is a query and its rows are returned. With a compound opening, the
// transaction's statements up to its COMMIT go as one compound statement
// where they may (joinBatch): no statement's own result is read then.
func (b *batchTx) roundTrip(ctx context.Context, items []queued, rows bool, compound string) (sql.Result, *sql.Rows, int, error) {
	b.queue, b.sent = nil, true
	if items[0].mark == markBegin {
		b.saved = true
	}
	base := batchMarks.Add(markStride)
	query, args := joinBatch(items, base, compound)
	var (
		res sql.Result
		rs  *sql.Rows
		err error
	)
	if rows {
		rs, err = b.conn.QueryContext(ctx, query, args...)
	} else {
		res, err = b.conn.ExecContext(ctx, query, args...)
	}
	if err == nil {
		return res, rs, len(items), nil
	}
	at := b.failedAt(ctx, items, base, err)
	if at >= 0 && at < len(items) && items[at].wrap != nil {
		err = items[at].wrap(err)
	}
	return nil, nil, at, err
}

// markHere, in a statement's text, is where joinBatch writes the
// assignment of the statement's mark, so that the statement needs no SET
// of its own before it (each costs MariaDB a statement). It is for an
// INSERT … VALUES spelled by the framework, as the first value of its
// row, in an expression whose value does not depend on the mark (such as
// markHere * 0 + x): MariaDB evaluates a row's values, first to last,
// before it writes the row, so every error of the row's values, of its
// write (a duplicate key, a lock wait, a deadlock) and of its ON
// DUPLICATE KEY UPDATE is read as the statement's. An error raised before
// the values are evaluated (the statement's table missing, a metadata
// lock's wait) is read as the statement's before it in the query, or as
// unknown when it is the query's first: put markHere only in a statement
// that is queued, so that the one before it is the transaction's begin or
// another queued write, and each of those readings fails the transaction
// as the statement's own would (only the error's wrap differs). Sent
// alone, outside a batch, it assigns a mark no batch uses.
const markHere = "(@retrysafe_at := 0)"

// batchMarks numbers the batches' marks: batch n marks its statements
// n, n+1, …, so that a mark left on the session by an earlier batch (one
// whose query never reached the server, a context that ended first) is
// never read as this one's.
var batchMarks atomic.Int64

// markStride is the marks a batch may use: more statements than any
// transaction queues.
const markStride = 1 << 20

// failedAt is the index of the item whose statement failed with err, or
// -1 when that is unknown: the error is not the server's answer to a
// statement (a context that ended, a connection that broke), or the
// transaction ended where no statement before the COMMIT may end it, and
// so what ran, COMMIT included, is unknown.
//
// The COMMIT has no mark, so its failure reads as the last marked
// statement before it. Every statement before the COMMIT that fails
// leaves the transaction open, but for those that end it: a deadlock
// rolls all of it back (what ran is known: nothing commits), and a
// statement with an implicit commit (DDL) commits what ran before it.
// So a failure read before the COMMIT while the session is in no
// transaction is the COMMIT's, or one that committed part of the
// transaction: unknown either way.
func (b *batchTx) failedAt(ctx context.Context, items []queued, base int64, err error) int {
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || kindOf(err) == unavailable {
		return -1
	}
	if len(items) == 1 {
		return 0
	}
	var (
		at   sql.NullInt64
		inTx bool
	)
	if qerr := b.conn.QueryRowContext(context.WithoutCancel(ctx), "SELECT @retrysafe_at, @@in_transaction").Scan(&at, &inTx); qerr != nil ||
		!at.Valid || at.Int64 < base || at.Int64 >= base+int64(len(items)) {
		return -1
	}
	i := int(at.Int64 - base)
	if commit := slices.IndexFunc(items, func(q queued) bool { return q.mark == markCommit }); (commit < 0 || i < commit) &&
		!inTx && kindOf(err) != deadlock {
		return -1
	}
	return i
}

// joinBatch spells items as one multi-statement query, each statement
// whose error must be told apart marked with its index.
//
// With a compound opening (BEGIN NOT ATOMIC, or SET STATEMENT … FOR
// BEGIN NOT ATOMIC), the statements from the transaction's START (or the
// first item, when the transaction began in an earlier round trip or
// items begin with its SET TRANSACTION) to its COMMIT go inside one
// compound statement, the opening … END, when inCompound allows them
// all: MariaDB then answers them with one OK packet, where a
// multi-statement query flushes one per statement (on a create's query
// alone, MariaDB's CPU per create fell from about 360 to 300 µs, and the
// framework's process read three answers, not nine; sent whole, one). The
// marks read the same: a statement that fails ends the compound
// statement with its error and leaves the transaction as it would have
// left it alone (open, but after a deadlock or an implicit commit). The
// session's SETs stay outside it, so that the statement time the begin
// sets bounds the compound statement, MariaDB's unit for
// max_statement_time: the transaction's writes and COMMIT together, not
// each, as on a multi-statement query. A transaction sent whole has no
// begin's SET: its opening, SET STATEMENT … FOR, sets the statement time
// for the compound statement alone (see whole).
//
// The begin's SET list assigns, instead of its own mark, that of the
// first statement after START TRANSACTION when that one would need a SET
// before it: one statement fewer (a transaction sent whole has no begin's
// SET, and its first write carries its own mark). The reading stays
// exact, for a failure of the begin's SET or of the START leaves the
// session in no transaction, which failedAt reads as unknown whatever
// the mark, and a failure of the statement, raised before or while it
// runs, leaves the transaction open with its mark read.
func joinBatch(items []queued, base int64, compound string) (string, []any) {
	if len(items) == 1 {
		return items[0].sql, items[0].args
	}
	from, to := -1, -1 // the compound statement's first and last items
	if compound != "" {
		from, to = compoundSpan(items)
	}
	n, nargs := 0, 0
	for _, it := range items {
		n += len(it.sql) + 26
		nargs += len(it.args)
	}
	var b strings.Builder
	b.Grow(n)
	args := make([]any, 0, nargs)
	premarked := -1 // the statement whose mark the begin's SET assigned
	for i, it := range items {
		if i > 0 {
			b.WriteString(";\n")
		}
		if i == from {
			b.WriteString(compound)
		}
		before, after, inline := strings.Cut(it.sql, markHere)
		switch {
		case it.mark == markNone || it.mark == markCommit || i == premarked:
			b.WriteString(it.sql)
		case it.mark == markBegin:
			m := i
			if i+2 < len(items) && items[i+1].mark == markNone && markedBySET(items[i+2]) {
				m, premarked = i+2, i+2
			}
			b.WriteString("SET @retrysafe_at = ")
			b.WriteString(strconv.FormatInt(base+int64(m), 10))
			b.WriteString(", ")
			b.WriteString(it.sql[len("SET "):])
		case isSETList(it.sql):
			// A SET list carries its mark: SET @retrysafe_at = i, ….
			b.WriteString("SET @retrysafe_at = ")
			b.WriteString(strconv.FormatInt(base+int64(i), 10))
			b.WriteString(", ")
			b.WriteString(it.sql[len("SET "):])
		case inline:
			b.WriteString(before)
			b.WriteString("(@retrysafe_at := ")
			b.WriteString(strconv.FormatInt(base+int64(i), 10))
			b.WriteString(")")
			b.WriteString(after)
		default:
			b.WriteString("SET @retrysafe_at = ")
			b.WriteString(strconv.FormatInt(base+int64(i), 10))
			b.WriteString(";\n")
			b.WriteString(it.sql)
		}
		if i == to {
			b.WriteString(";\nEND")
		}
		args = append(args, it.args...)
	}
	return b.String(), args
}

// compoundSpan is the span of items that joinBatch sends as one compound
// statement: from the transaction's START, or the first item when the
// begin is not among them, to its COMMIT, when there are at least two
// statements and inCompound allows each; -1, -1 otherwise.
func compoundSpan(items []queued) (from, to int) {
	to = slices.IndexFunc(items, func(q queued) bool { return q.mark == markCommit })
	if to < 0 {
		return -1, -1
	}
	from = 0
	if items[0].mark == markBegin {
		from = 1
	}
	if to <= from {
		return -1, -1
	}
	for _, it := range items[from : to+1] {
		if !inCompound(it) {
			return -1, -1
		}
	}
	return from, to
}

// compoundHeads are how the statements that inCompound allows begin.
var compoundHeads = []string{"INSERT ", "UPDATE ", "DELETE ", "REPLACE ", "SET @", "SET TRANSACTION ", "START TRANSACTION",
	"SAVEPOINT ", "RELEASE SAVEPOINT ", "COMMIT"}

// inCompound reports whether it may go inside a compound statement: a
// write, a savepoint, a mark, the begin (SET TRANSACTION, START) and
// COMMIT, and nothing that
// returns rows (a result set would come before the compound statement's
// answer). Any other statement (DDL, a SET STATEMENT … FOR, what the
// application queued that is none of these) sends the batch as a plain
// multi-statement query.
func inCompound(it queued) bool {
	if it.rows {
		return false
	}
	return slices.ContainsFunc(compoundHeads, func(head string) bool {
		return len(it.sql) >= len(head) && strings.EqualFold(it.sql[:len(head)], head)
	})
}

// isSETList reports whether sql is a SET of variables, which carries its
// own mark in its list.
func isSETList(sql string) bool {
	return strings.HasPrefix(sql, "SET @") || strings.HasPrefix(sql, "SET SESSION ")
}

// markedBySET reports whether joinBatch marks it with a SET before it.
func markedBySET(it queued) bool {
	return it.mark == markEach && !isSETList(it.sql) && !strings.Contains(it.sql, markHere)
}

// send sends the queue, then last, and returns last's result. An error
// of a queued statement fails the transaction; last's own error is
// returned as a single statement's would be.
func (b *batchTx) send(ctx context.Context, last queued, rows bool) (sql.Result, *sql.Rows, error) {
	if rows && slices.ContainsFunc(b.queue, func(q queued) bool { return q.rows }) {
		// go-sql-driver would hand the query the first rows of the
		// round trip: a queued statement's.
		if err := b.flush(ctx); err != nil {
			return nil, nil, err
		}
	}
	items := append(b.queue, last)
	res, rs, at, err := b.roundTrip(ctx, items, rows, "")
	if err != nil {
		if at != len(items)-1 || deadlockOrBroken(err) {
			b.failed = err
		}
		return nil, nil, err
	}
	return res, rs, nil
}

// flush sends what is queued.
func (b *batchTx) flush(ctx context.Context) error {
	if b.failed != nil || len(b.queue) == 0 {
		return b.failed
	}
	items := b.queue
	if _, _, _, err := b.roundTrip(ctx, items, false, ""); err != nil {
		b.failed = err
	}
	return b.failed
}

// deadlockOrBroken reports whether err means the server ended the
// transaction (a deadlock rolls all of it back) or the connection broke.
func deadlockOrBroken(err error) bool {
	k := kindOf(err)
	return k == deadlock || k == unavailable
}

func (b *batchTx) PrepareContext(ctx context.Context, query string) (*sql.Stmt, error) {
	if err := b.flush(ctx); err != nil {
		return nil, err
	}
	st, err := b.conn.PrepareContext(ctx, query)
	if err != nil && deadlockOrBroken(err) {
		b.failed = err
	}
	return st, err
}

// ExecContext sends the queue and the statement in one round trip.
// gorm's SAVEPOINT and RELEASE SAVEPOINT need no answer: they are queued.
// Numbered placeholders (pipeline.Exec's) are spelled as ?.
func (b *batchTx) ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error) {
	if b.failed != nil {
		return nil, b.failed
	}
	query, args = pipeline.QuestionMarks(query, args)
	if len(args) == 0 && (strings.HasPrefix(query, "SAVEPOINT ") || strings.HasPrefix(query, "RELEASE SAVEPOINT ")) {
		b.queue = append(b.queue, queued{sql: query})
		return driver.RowsAffected(0), nil
	}
	if len(b.queue) == 0 {
		res, err := b.conn.ExecContext(ctx, query, args...)
		if err != nil && deadlockOrBroken(err) {
			b.failed = err
		}
		return res, err
	}
	res, _, err := b.send(ctx, queued{sql: query, args: args}, false)
	return res, err
}

// QueryContext sends the queue and the query in one round trip.
func (b *batchTx) QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	if b.failed != nil {
		return nil, b.failed
	}
	query, args = pipeline.QuestionMarks(query, args)
	if len(b.queue) == 0 {
		rows, err := b.conn.QueryContext(ctx, query, args...)
		if err != nil && deadlockOrBroken(err) {
			b.failed = err
		}
		return rows, err
	}
	_, rows, err := b.send(ctx, queued{sql: query, args: args}, true)
	return rows, err
}

// QueryRowContext cannot carry an error of its own in *sql.Row: the queue
// goes first, and after a failure the query runs on a cancelled context,
// so that nothing reaches the server and Write returns the failure.
func (b *batchTx) QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row {
	if b.flush(ctx) != nil {
		dead, cancel := context.WithCancelCause(ctx)
		cancel(b.failed)
		ctx = dead
	}
	return b.conn.QueryRowContext(ctx, query, args...)
}

// Queue implements [pipeline.Tx]. Numbered placeholders ($1, $2, …, as
// pipeline.LaterSQL passes them) are spelled as ?.
func (b *batchTx) Queue(sql string, args []any, wrap func(error) error) {
	sql, args = pipeline.QuestionMarks(sql, args)
	b.queue = append(b.queue, queued{sql: sql, args: args, wrap: wrap, rows: mayReturnRows(sql)})
}

// mayReturnRows reports whether sql may return rows: it reads, or it
// writes with RETURNING.
func mayReturnRows(sql string) bool {
	head := strings.TrimLeft(sql, " \t\r\n(")
	return len(head) >= 6 && (strings.EqualFold(head[:6], "SELECT") || strings.EqualFold(head[:4], "WITH") || strings.EqualFold(head[:4], "SHOW")) ||
		containsFold(sql, "RETURNING")
}

// containsFold reports whether s contains word, ASCII case folded.
func containsFold(s, word string) bool {
	for i := 0; i+len(word) <= len(s); i++ {
		if strings.EqualFold(s[i:i+len(word)], word) {
			return true
		}
	}
	return false
}

// Waiting implements [pipeline.Tx].
func (b *batchTx) Waiting() bool { return len(b.queue) > 0 && b.failed == nil }

// Query implements [pipeline.Tx]: the queue and the query in one round
// trip, the query's rows scanned into dest by gorm.
func (b *batchTx) Query(ctx context.Context, query string, args []any, dest *gorm.DB) error {
	rows, err := b.QueryContext(ctx, query, args...)
	if err != nil {
		return err
	}
	gorm.Scan(rows, dest, 0)
	if cerr := rows.Close(); cerr != nil && dest.Error == nil {
		dest.Error = cerr
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if dest.Error != nil && !errors.Is(dest.Error, gorm.ErrRecordNotFound) {
		return dest.Error
	}
	return nil
}

// Failed is the error with which the transaction failed on the server.
func (b *batchTx) Failed() error { return b.failed }

// Commit fails: Write commits when fn returns nil.
func (*batchTx) Commit() error { return store.ErrOwnedByWrite }

// Rollback fails: Write rolls back when fn returns an error.
func (*batchTx) Rollback() error { return store.ErrOwnedByWrite }

// onlyBegin reports whether nothing but the begin was ever queued: the
// transaction has not started on the server and has nothing to commit.
func (b *batchTx) onlyBegin() bool {
	return !b.sent && len(b.queue) == 2 && b.queue[1].mark == markNone
}

// Finish sends the queue, COMMIT and the session's restore in one round
// trip (nothing when fn wrote nothing). A failure before the COMMIT rolls
// back; a failure of the COMMIT, or of a connection that broke, leaves the
// outcome unknown to this side, and the connection is discarded; a
// failure of the restore alone discards the connection (the transaction
// committed).
//
// A transaction of which nothing was sent yet, and whose statements a
// compound statement may all hold, goes whole as one statement instead
// (whole): its settings set for that statement alone, nothing to save or
// restore.
func (b *batchTx) Finish(ctx context.Context) error {
	if b.failed != nil {
		b.Abort(ctx)
		return b.failed
	}
	if b.onlyBegin() {
		b.queue = nil
		return nil
	}
	items, compound := b.whole()
	if items == nil {
		items = append(b.queue, queued{sql: "COMMIT", mark: markCommit}, queued{sql: restoreSQL})
		compound = "BEGIN NOT ATOMIC "
	}
	commit := slices.IndexFunc(items, func(q queued) bool { return q.mark == markCommit })
	_, _, at, err := b.roundTrip(ctx, items, false, compound)
	switch {
	case err == nil:
		return nil
	case at > commit:
		_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
		return nil
	case at < 0 || at == commit:
		_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
		return err
	}
	b.failed = err
	b.Abort(ctx)
	return err
}

// whole is the transaction as one statement, when nothing of it was sent
// and a compound statement may hold all of it:
//
//	SET STATEMENT innodb_lock_wait_timeout = L, max_statement_time = S FOR
//	BEGIN NOT ATOMIC SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
//	START TRANSACTION; …; COMMIT; END
//
// items are its statements, SET TRANSACTION to COMMIT, and compound the
// opening joinBatch writes before them; nil otherwise. SET STATEMENT sets
// the timeouts for the statement alone, the compound statement with what
// runs inside it, and SET TRANSACTION the isolation of the next
// transaction alone (tx_isolation cannot be set by SET STATEMENT), which
// START TRANSACTION begins: the session is left as it was, with no SET
// list to save it and no restore, and MariaDB answers one statement where
// the begin's SET, the compound statement and the restore are three (in
// the bench, MariaDB's CPU per create fell from 363 to 335 µs). The first
// write carries its own mark, so that a failure of SET TRANSACTION or
// START, which leaves the mark an earlier batch's, reads as unknown: the
// connection is discarded, with whatever SET TRANSACTION left pending. A
// failure after START leaves the transaction as a compound statement does
// (see joinBatch), and Abort rolls it back.
func (b *batchTx) whole() ([]queued, string) {
	if b.sent || len(b.queue) < 2 || b.queue[0].mark != markBegin {
		return nil, ""
	}
	items := make([]queued, 0, len(b.queue)+1)
	items = append(items, queued{sql: "SET TRANSACTION ISOLATION LEVEL READ COMMITTED", mark: markNone})
	items = append(items, b.queue[1:]...)
	items = append(items, queued{sql: "COMMIT", mark: markCommit})
	if from, to := compoundSpan(items); from != 0 || to != len(items)-1 {
		return nil, ""
	}
	lockWait, statementTime := settings(b.lockTimeout, b.statementTimeout)
	return items, "SET STATEMENT innodb_lock_wait_timeout = " + lockWait + ", max_statement_time = " + statementTime +
		" FOR BEGIN NOT ATOMIC "
}

// Abort rolls back, and restores the session when the begin's SET list
// ran, in one round trip, dropping what is queued, or discards the
// connection when that fails.
func (b *batchTx) Abort(ctx context.Context) {
	begun := b.sent
	b.queue = nil
	if !begun {
		return
	}
	query := "ROLLBACK"
	if b.saved {
		query += ";\n" + restoreSQL
	}
	if _, err := b.conn.ExecContext(context.WithoutCancel(ctx), query); err != nil {
		_ = b.conn.Raw(func(any) error { return driver.ErrBadConn })
	}
}
