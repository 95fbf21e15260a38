package rowsql

import (
	"context"
	"database/sql/driver"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// insertPlan is the INSERT of one model type into one table, spelled as
// gorm's Create (associations omitted) spells it, but built once from
// gorm's schema: a pipelined create then costs no gorm statement (callbacks,
// clauses, quoting) per request, only one read of each column's value by
// the schema's accessor. It covers the models whose INSERT gorm writes the
// same way every time; for any other it is nil, and the write goes through
// gorm (see insertPlanOf).
type insertPlan struct {
	// head is `INSERT INTO "table" ("a","b",…) VALUES `.
	head     string
	fields   []*schema.Field
	numbered bool
	// sql caches the statement text for n rows, up to maxCachedRows rows.
	sql sync.Map
}

// maxCachedRows bounds the row counts whose statement text a plan keeps:
// a create's child rows are few, and a text per count of a bulk insert
// would grow without bound.
const maxCachedRows = 128

// planKey names a plan: one per model type and table.
type planKey struct {
	model reflect.Type
	table string
}

// cachedPlan returns the plan of model into table on db from cache, made
// by build the first time (nil is kept too: gorm does that write).
func cachedPlan[P any](cache *sync.Map, db *gorm.DB, table string, model reflect.Type, build func(*gorm.DB, string, reflect.Type) *P) *P {
	key := planKey{model: model, table: table}
	if pl, ok := cache.Load(key); ok {
		return pl.(*P)
	}
	pl := build(db, table, model)
	cache.Store(key, pl)
	return pl
}

// placeholder is the spelling of the n-th parameter of a statement.
func (s Spelling) placeholder(n int) string {
	if s.Numbered {
		return "$" + strconv.Itoa(n)
	}
	return "?"
}

// insertPlanOf returns the plan of rows of type model (a struct type) into
// table (the model's own when empty), or nil where gorm must write them:
// a model with gorm hooks or create clauses of its fields, a column with
// a database default or an auto-increment key (gorm leaves it out when
// zero and reads it back), or a field of a type gorm's own encoding could
// treat differently from the driver's (a slice or map without a
// driver.Valuer or serializer).
func (r *rows) insertPlanOf(db *gorm.DB, table string, model reflect.Type) *insertPlan {
	return cachedPlan(&r.insertPlans, db, table, model, r.newInsertPlan)
}

var valuerType = reflect.TypeFor[driver.Valuer]()

func (r *rows) newInsertPlan(db *gorm.DB, table string, model reflect.Type) *insertPlan {
	s, err := r.schemaOf(db, reflect.New(model).Interface())
	if err != nil {
		return nil
	}
	if table == "" {
		table = s.Table
	}
	if s.BeforeCreate || s.AfterCreate || s.BeforeSave || s.AfterSave || len(s.CreateClauses) > 0 {
		return nil
	}
	var head strings.Builder
	head.WriteString("INSERT INTO " + quote(db, table) + " (")
	pl := &insertPlan{numbered: r.s.Numbered}
	for _, name := range s.DBNames {
		f := s.FieldsByDBName[name]
		if !f.Creatable {
			continue
		}
		if f.HasDefaultValue || f.AutoIncrement || !plainValue(f) {
			return nil
		}
		if len(pl.fields) > 0 {
			head.WriteByte(',')
		}
		head.WriteString(quote(db, name))
		pl.fields = append(pl.fields, f)
	}
	if len(pl.fields) == 0 {
		return nil
	}
	head.WriteString(") VALUES ")
	pl.head = head.String()
	if !pl.matchesGorm(db, table, model, r.s) {
		return nil
	}
	return pl
}

// matchesGorm reports whether gorm, the version the application brings,
// spells the INSERT of one row of model into table as the plan does (the
// same text, the same number of arguments): a plan is only a faster way to
// send gorm's own statement, and a gorm that writes it differently (a
// column order, a clause, a quoting or a placeholder of its own) gets its
// own way.
func (pl *insertPlan) matchesGorm(db *gorm.DB, table string, model reflect.Type, s Spelling) bool {
	dry := db.Session(&gorm.Session{DryRun: true, SkipHooks: true, NewDB: true}).
		Table(table).Omit(clause.Associations).Create(reflect.New(model).Interface())
	if dry.Error != nil {
		return false
	}
	var want strings.Builder
	want.WriteString(pl.head)
	want.WriteByte('(')
	for j := range pl.fields {
		if j > 0 {
			want.WriteByte(',')
		}
		want.WriteString(s.placeholder(j + 1))
	}
	want.WriteByte(')')
	return dry.Statement.SQL.String() == want.String() && len(dry.Statement.Vars) == len(pl.fields)
}

// plainValue reports whether gorm passes f's value to the driver as it is:
// a serializer's, a driver.Valuer, a time, bytes, or a scalar.
func plainValue(f *schema.Field) bool {
	if f.Serializer != nil {
		return true
	}
	t := f.FieldType
	if t.Implements(valuerType) || reflect.PointerTo(t).Implements(valuerType) {
		return true
	}
	if t.Kind() == reflect.Pointer {
		t = t.Elem()
		if t.Implements(valuerType) {
			return true
		}
	}
	if t == reflect.TypeFor[time.Time]() || t == reflect.TypeFor[[]byte]() {
		return true
	}
	switch t.Kind() {
	case reflect.Bool, reflect.String, reflect.Float32, reflect.Float64,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return true
	}
	return false
}

// statement returns the INSERT of rows (one addressable struct, or a slice
// of them) and its arguments, in the database's placeholders. It reports
// false when a row needs gorm: an autoCreateTime or autoUpdateTime column
// left zero, which gorm fills in.
func (pl *insertPlan) statement(ctx context.Context, rows reflect.Value) (string, []any, bool) {
	n := 1
	if rows.Kind() == reflect.Slice {
		n = rows.Len()
	}
	args := make([]any, 0, n*len(pl.fields))
	for i := range n {
		row := rows
		if rows.Kind() == reflect.Slice {
			row = rows.Index(i)
		}
		for _, f := range pl.fields {
			v, zero := f.ValueOf(ctx, row)
			if zero && (f.AutoCreateTime > 0 || f.AutoUpdateTime > 0) {
				return "", nil, false
			}
			args = append(args, v)
		}
	}
	if sql, ok := pl.sql.Load(n); ok {
		return sql.(string), args, true
	}
	var b strings.Builder
	b.WriteString(pl.head)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteByte('(')
		for j := range pl.fields {
			if j > 0 {
				b.WriteByte(',')
			}
			if !pl.numbered {
				b.WriteByte('?')
				continue
			}
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(i*len(pl.fields) + j + 1))
		}
		b.WriteByte(')')
	}
	sql := b.String()
	if n <= maxCachedRows {
		pl.sql.Store(n, sql)
	}
	return sql, args, true
}

// laterInsert queues the INSERT of rows (a pointer to a model, or to a
// slice of them) into table (the model's own when "") on tx by its plan
// (pipeline.LaterSQL), or, where tx does not pipeline (SQLite, a MySQL
// pool that does not batch, the application's own transaction), sends it
// now by the plan, straight to tx's connection: no gorm statement is
// built either way. On SQLite, one writer at a time, what a write
// transaction spends in the process it spends holding the database's
// write lock. It reports false, having written nothing, where the plan
// does not apply: the plans are off, gorm would split the rows
// (CreateBatchSize), or the model or a row needs gorm.
func (r *rows) laterInsert(ctx context.Context, tx *gorm.DB, table string, rows any, wrap func(error) error) (bool, error) {
	if !r.plans || tx.CreateBatchSize > 0 || tx.DryRun {
		// CreateBatchSize: gorm splits a slice into several INSERTs.
		return false, nil
	}
	rv := reflect.ValueOf(rows)
	if rv.Kind() != reflect.Pointer {
		return false, nil
	}
	rv = rv.Elem()
	model := rv.Type()
	if model.Kind() == reflect.Slice {
		if rv.Len() == 0 {
			return false, nil
		}
		model = model.Elem()
	}
	if model.Kind() != reflect.Struct {
		return false, nil
	}
	pl := r.insertPlanOf(tx, table, model)
	if pl == nil {
		return false, nil
	}
	sql, args, ok := pl.statement(ctx, rv)
	if !ok {
		return false, nil
	}
	if pipeline.Pipelined(tx) {
		return true, pipeline.LaterSQL(tx, sql, args, wrap)
	}
	start := time.Now()
	res, err := tx.Statement.ConnPool.ExecContext(ctx, sql, args...)
	tx.Logger.Trace(ctx, start, func() (string, int64) {
		n := int64(-1)
		if err == nil {
			n, _ = res.RowsAffected()
		}
		return sql, n
	}, err)
	if err != nil && wrap != nil {
		return true, wrap(err)
	}
	return true, err
}

// readPlan is the read of one row by its key into a model, as gorm's Take
// does it (every column, each into the model's field of that name through
// the field's value pool and setter, unknown columns dropped), together
// with the database clock in the same statement, with the statement text
// fixed once per model type and table: the read-first of every PUT costs
// no gorm statement and no round trip of its own for the clock. The row is
// left-joined to one row, so that a miss still returns the clock (and
// NULLs). It is nil for a model with an AfterFind hook, which gorm would
// run.
type readPlan struct {
	schema *schema.Schema
	// sql is the statement by LiveOnly (index 1 skips tombstones).
	sql [2]string
	// clock, set where sql is a plain WHERE on the key (no joined row, so
	// a miss returns no row: [Spelling.CompilesEachStatement]), reads the
	// clock after a miss.
	clock string
}

// readPlanOf returns the plan of a read of model from table on db.
func (r *rows) readPlanOf(db *gorm.DB, table string, model reflect.Type) *readPlan {
	return cachedPlan(&r.readPlans, db, table, model, r.newReadPlan)
}

func (r *rows) newReadPlan(db *gorm.DB, table string, model reflect.Type) *readPlan {
	s, err := r.schemaOf(db, reflect.New(model).Interface())
	if err != nil || s.AfterFind {
		return nil
	}
	now := r.d.Now()
	t := quote(db, table)
	on := t + ".tenant_id = " + r.s.placeholder(1) + " AND " + t + ".id = " + r.s.placeholder(2)
	base := "SELECT " + now + ", " + t + ".* FROM (SELECT 1) AS " + quote(db, "retrysafe_one") + " LEFT JOIN " + t + " ON " + on
	pl := &readPlan{schema: s}
	if r.s.CompilesEachStatement {
		base = "SELECT " + now + ", " + t + ".* FROM " + t + " WHERE " + on
		pl.clock = "SELECT " + now
	}
	pl.sql = [2]string{base, base + " AND " + t + ".deleted_at IS NULL"}
	return pl
}

// read loads the row of key into dest (an addressable struct) on db and
// returns whether there was one and the database clock as of the read,
// through the driver's own row read where it has one ([store.QueryRow])
// and with the ID as the driver sends it ([Spelling.UUIDArg]). The
// statement is reported to db's gorm logger as gorm would report it.
func (pl *readPlan) read(ctx context.Context, db *gorm.DB, s Spelling, key store.RowKey, liveOnly bool, dest reflect.Value) (found bool, now time.Time, err error) {
	query := pl.sql[0]
	if liveOnly {
		query = pl.sql[1]
	}
	start := time.Now()
	defer func() {
		n := int64(0)
		if found {
			n = 1
		}
		db.Logger.Trace(ctx, start, func() (string, int64) { return query, n }, err)
	}()
	var id any = key.ID
	if s.UUIDArg != nil {
		id = s.UUIDArg(key.ID)
	}
	var clock store.DatabaseTime
	var values []any
	var fields []*schema.Field
	tenant := -1
	// destOf returns the destinations of the row's columns: the clock,
	// then each column into the model's field of that name through the
	// field's value pool, an unknown column into a throwaway.
	destOf := func(columns []string) []any {
		values = make([]any, len(columns))
		fields = make([]*schema.Field, len(columns))
		values[0] = &clock
		for i, c := range columns[1:] {
			i++
			if f := pl.schema.LookUpField(c); f != nil && f.Readable {
				fields[i], values[i] = f, f.NewValuePool.Get()
				if f.DBName == "tenant_id" {
					tenant = i
				}
			} else {
				values[i] = new(any)
			}
		}
		return values
	}
	got, err := store.QueryRow(ctx, s.QueryRow, db.Statement.ConnPool, query, []any{key.Tenant, id}, destOf)
	if err != nil {
		return false, now, err
	}
	if !got {
		if pl.clock == "" {
			return false, now, errNoClockRow
		}
		// A miss of a plain read: the clock alone. The row's read is
		// reported here, the clock's by the deferred report.
		db.Logger.Trace(ctx, start, func() (string, int64) { return query, 0 }, nil)
		start, query = time.Now(), pl.clock
		err = db.Statement.ConnPool.QueryRowContext(ctx, pl.clock).Scan(&clock)
		return false, clock.Time, err
	}
	// A miss is the joined row's NULLs: tenant_id, NOT NULL in a row, is
	// scanned into a pointer left nil.
	found = tenant >= 0 && !reflect.ValueOf(values[tenant]).Elem().IsNil()
	for i, f := range fields {
		if f == nil {
			continue
		}
		if found {
			if err := f.Set(ctx, dest, values[i]); err != nil {
				return false, now, err
			}
		}
		f.NewValuePool.Put(values[i])
	}
	return found, clock.Time, nil
}

// errNoClockRow: the read plan's statement, which always returns one row,
// returned none.
var errNoClockRow = errors.New("rowsql: the read of a row and the database clock returned no row")
