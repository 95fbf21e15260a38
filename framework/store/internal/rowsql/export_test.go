package rowsql

import (
	"context"
	"reflect"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// MaxCachedRows is maxCachedRows.
const MaxCachedRows = maxCachedRows

// InsertPlanOf is r's insertPlanOf; r is a store's Rows.
func InsertPlanOf(r store.Rows, db *gorm.DB, table string, model reflect.Type) *insertPlan {
	return r.(*rows).insertPlanOf(db, table, model)
}

// Statement is pl's statement.
func (pl *insertPlan) Statement(ctx context.Context, rows reflect.Value) (string, []any, bool) {
	return pl.statement(ctx, rows)
}

// Head is pl's head.
func (pl *insertPlan) Head() string { return pl.head }

// Cached reports whether pl keeps the text of n rows.
func (pl *insertPlan) Cached(n int) bool {
	_, ok := pl.sql.Load(n)
	return ok
}

// InsertPlans is how many insert plans r keeps of table.
func InsertPlans(r store.Rows, table string) int {
	n := 0
	r.(*rows).insertPlans.Range(func(k, _ any) bool {
		if k.(planKey).table == table {
			n++
		}
		return true
	})
	return n
}

// LaterInsert is r's laterInsert, unwrapped.
func LaterInsert(ctx context.Context, r store.Rows, tx *gorm.DB, table string, values any) (bool, error) {
	return r.(*rows).laterInsert(ctx, tx, table, values, nil)
}

// ReadPlanOf is r's readPlanOf.
func ReadPlanOf(r store.Rows, db *gorm.DB, table string, model reflect.Type) *readPlan {
	return r.(*rows).readPlanOf(db, table, model)
}

// SQL is pl's statement without LiveOnly, and the clock's apart ("" where
// the statement reads it).
func (pl *readPlan) SQL() (row, clock string) { return pl.sql[0], pl.clock }

// Read is pl's read by r's spelling, or, plain, through database/sql
// with the ID as a uuid.UUID.
func (pl *readPlan) Read(ctx context.Context, db *gorm.DB, r store.Rows, plain bool, key store.RowKey, liveOnly bool, dest reflect.Value) (bool, error) {
	s := r.(*rows).s
	if plain {
		s.QueryRow, s.UUIDArg = nil, nil
	}
	found, now, err := pl.read(ctx, db, s, key, liveOnly, dest)
	if err == nil && now.IsZero() {
		err = errNoClockRow
	}
	return found, err
}
