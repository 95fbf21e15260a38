package pipeline

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/schema"
)

// Tx is what a driver's transaction connection (store.Tx) implements to
// pipeline (storepg; storemysql on a pool that batches). Its SQL is the
// driver's own; Queue takes numbered placeholders ($1, $2, …), which
// LaterSQL passes, and the driver's own.
type Tx interface {
	// Queue adds a statement to be sent with the transaction's next round
	// trip; its error, passed through wrap when set, is reported by that
	// round trip's statement or by the commit.
	Queue(sql string, args []any, wrap func(error) error)
	// Waiting reports whether statements are queued and nothing has
	// failed: a query then saves a round trip by going with them.
	Waiting() bool
	// Query sends what is queued and the query sql in one round trip and
	// scans its rows into dest, a dry-run gorm statement, as gorm would.
	Query(ctx context.Context, sql string, args []any, dest *gorm.DB) error
	// ExecContext sends what is queued and sql in one round trip.
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

func pipelineOf(tx *gorm.DB) (Tx, bool) {
	p, ok := tx.Statement.ConnPool.(Tx)
	return p, ok
}

// Pipelined reports whether tx is a transaction whose writes [Later] and
// [LaterSQL] queue for the next round trip.
func Pipelined(tx *gorm.DB) bool {
	_, ok := pipelineOf(tx)
	return ok
}

// Later queues the write that build makes on tx for the next round trip of
// tx's transaction, when [Pipelined] reports true; its error (passed
// through wrap, when wrap is set) is then reported by the next statement
// or by Write, and the transaction does not commit. Anywhere else the
// write runs now and its error is returned, wrapped.
//
// Use it only for a write whose answer nothing needs: build must not need
// its rows affected or returned columns. A statement that would return
// columns into the model (gorm's RETURNING for database defaults), and a
// write of a model with gorm hooks (BeforeCreate, AfterSave, …), run now.
// build receives a dry-run session of tx and returns it with one statement
// built.
func Later(tx *gorm.DB, build func(*gorm.DB) *gorm.DB, wrap func(error) error) error {
	if wrap == nil {
		wrap = func(err error) error { return err }
	}
	p, ok := pipelineOf(tx)
	if !ok {
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
	p.Queue(dry.Statement.SQL.String(), dry.Statement.Vars, wrap)
	return nil
}

// LaterSQL queues sql, in the driver's SQL with numbered placeholders (or
// the driver's own, in a driver's own statements), and args on tx, a
// transaction for which [Pipelined] reports true, so that a hot write
// costs no gorm statement. Anywhere else it queues nothing and returns an
// error.
func LaterSQL(tx *gorm.DB, sql string, args []any, wrap func(error) error) error {
	p, ok := pipelineOf(tx)
	if !ok {
		return errNotPipelined
	}
	p.Queue(sql, args, wrap)
	return nil
}

var errNotPipelined = errors.New("pipeline: LaterSQL needs a pipelined DB.Write transaction")

// Exec runs sql, a statement with gorm's ? placeholders, with args on tx
// and returns the rows it affected, as tx.Exec(sql, args...) would. In a
// transaction for which [Pipelined] reports true it builds no gorm
// statement: the placeholders are numbered ([NumberPlaceholders]) and the
// statement goes out with what is queued before it (one round trip), and
// it is reported to tx's gorm logger as gorm's Exec would report it.
// Arguments that gorm would expand (a slice for IN ?, a map of named
// arguments) send it through gorm.
func Exec(tx *gorm.DB, query string, args ...any) (int64, error) {
	p, ok := pipelineOf(tx)
	if !ok || !plainArgs(args) {
		res := tx.Exec(query, args...)
		return res.RowsAffected, res.Error
	}
	sql := NumberPlaceholders(query)
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

// Find runs the query that build makes on tx (a gorm Find, Take, First or
// Raw(…).Find) and scans its rows into build's destination, as build(tx)
// would. When tx is pipelined and writes are waiting to be sent (the
// begin, writes queued by [Later]), they go out in the same round trip as
// the query: a transaction whose first statement must return rows (INSERT
// … RETURNING) costs no round trip for its BEGIN. The result (Error,
// RowsAffected) is returned.
func Find(tx *gorm.DB, build func(*gorm.DB) *gorm.DB) *gorm.DB {
	p, ok := pipelineOf(tx)
	if !ok || !p.Waiting() {
		return build(tx)
	}
	dry := build(tx.Session(&gorm.Session{DryRun: true, SkipHooks: true}))
	if dry.Error != nil || dry.Statement.SQL.Len() == 0 || hasHooks(dry.Statement.Schema) {
		return build(tx)
	}
	dry.Error = nil
	if err := p.Query(tx.Statement.Context, dry.Statement.SQL.String(), dry.Statement.Vars, dry); err != nil {
		dry.Error = err
	}
	return dry
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

// NumberPlaceholders spells sql's ? placeholders as $1, $2, … for
// [LaterSQL]. A ? inside a quoted string literal or identifier is left
// as it is; sql must have no ? operator (PostgreSQL's jsonb ?).
func NumberPlaceholders(sql string) string {
	var b strings.Builder
	b.Grow(len(sql) + 8)
	n := 0
	var q quoting
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		if !q.quoted(c, `'"`) && c == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// QuestionMarks is the inverse of [NumberPlaceholders], for a driver whose
// placeholders are ? (storemysql): sql's $1, $2, … become ?, with args in
// the order of the ?s (a number used twice, its argument twice). sql
// without them is returned as it is. A $ inside a quoted string or
// identifier, or within a name (MySQL allows cost$1 unquoted), is left
// alone, as is a number no argument has; a statement with a ? of its own
// is returned as it is.
func QuestionMarks(sql string, args []any) (string, []any) {
	if !strings.Contains(sql, "$") {
		return sql, args
	}
	var b strings.Builder
	b.Grow(len(sql))
	ordered := make([]any, 0, len(args))
	inOrder := true
	var q quoting
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		quoted := q.quoted(c, "'\"`")
		if !quoted && c == '?' {
			// Already spelled with ?: a $1 in it is not a placeholder of
			// args, whose order the ?s give.
			return sql, args
		}
		if !quoted && c == '$' && i+1 < len(sql) && isDigit(sql[i+1]) && (i == 0 || !nameByte(sql[i-1])) {
			j := i + 1
			for j < len(sql) && isDigit(sql[j]) {
				j++
			}
			if n, _ := strconv.Atoi(sql[i+1 : j]); n >= 1 && n <= len(args) {
				if n != len(ordered)+1 {
					inOrder = false
				}
				ordered = append(ordered, args[n-1])
				b.WriteByte('?')
			} else {
				b.WriteString(sql[i:j])
			}
			i = j - 1
			continue
		}
		b.WriteByte(c)
	}
	if inOrder && len(ordered) == len(args) {
		ordered = args
	}
	return b.String(), ordered
}

// quoting follows SQL text byte by byte through its quoted strings and
// identifiers.
type quoting struct{ quote byte }

// quoted reports whether c, the next byte, is part of a quoted string or
// identifier (its quotes included) opened by one of quotes.
func (q *quoting) quoted(c byte, quotes string) bool {
	switch {
	case q.quote != 0:
		if c == q.quote {
			q.quote = 0
		}
		return true
	case strings.IndexByte(quotes, c) >= 0:
		q.quote = c
		return true
	}
	return false
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// nameByte reports whether c may be part of an unquoted SQL name.
func nameByte(c byte) bool {
	return c == '_' || c == '$' || isDigit(c) || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// hasHooks reports whether gorm runs model hooks on a write of s.
func hasHooks(s *schema.Schema) bool {
	return s != nil && (s.BeforeCreate || s.AfterCreate || s.BeforeSave || s.AfterSave ||
		s.BeforeUpdate || s.AfterUpdate || s.BeforeDelete || s.AfterDelete)
}
