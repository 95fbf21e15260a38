package rowsql

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sync"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// New returns the [store.Rows] of driver d, whose database is spelled s.
// Its plans (a model's INSERT spelled once, its read by key with the
// clock in one statement) and the time steps it reads are kept in it, per
// model and table.
func New(d store.Driver, s Spelling, cfg store.RowsConfig) store.Rows {
	return &rows{d: d, s: s, plans: !cfg.DisablePlans}
}

// rows is [store.Rows] through gorm, with the plans of the hot statements
// where they apply.
type rows struct {
	d store.Driver
	s Spelling
	// plans: the hot statements run by their plans where one applies
	// ([store.RowsConfig.DisablePlans] turns them off).
	plans bool
	// schemas is the cache of gorm's schema parses (schema.Parse).
	schemas sync.Map
	// insertPlans and readPlans hold the plan (or nil) of each planKey.
	insertPlans, readPlans sync.Map
	// steps holds the time step of each table read ([rows.TimeStep]).
	steps sync.Map
}

var _ store.Rows = (*rows)(nil)

var keyColumns = []clause.Column{{Name: "tenant_id"}, {Name: "id"}}

// schemaOf parses the gorm schema of model (a pointer to a struct, or to
// a slice of them) on db.
func (r *rows) schemaOf(db *gorm.DB, model any) (*schema.Schema, error) {
	return schema.Parse(model, &r.schemas, db.NamingStrategy)
}

// onKey classifies err, the error of a statement on one row by its key,
// and marks a wait past the lock timeout for that row as the key's
// ([store.KeyLocked]).
func (r *rows) onKey(err error) error { return store.KeyLocked(r.d.Classify(err)) }

// onTable is gorm's session of db on table, or on the model's own table
// when table is empty.
func onTable(db *gorm.DB, table string) *gorm.DB {
	if table == "" {
		return db
	}
	return db.Table(table)
}

func (r *rows) Insert(ctx context.Context, db *gorm.DB, p store.RowInsertParams) (bool, error) {
	res := onTable(db.WithContext(ctx), p.Table).Omit(clause.Associations).
		Clauses(clause.OnConflict{Columns: keyColumns, DoNothing: true}).Create(p.Row)
	if res.Error != nil {
		return false, r.onKey(res.Error)
	}
	if res.RowsAffected == 1 || !r.s.SkipsAnyUniqueConflict {
		return res.RowsAffected == 1, nil
	}
	// The row was skipped for a conflict on some unique index, and the
	// conflicting row is locked: the key's own row, or another row that
	// holds the resource's unique value.
	s, err := r.schemaOf(db, p.Row)
	if err != nil {
		return false, err
	}
	row := reflect.Indirect(reflect.ValueOf(p.Row))
	tenant, id := s.LookUpField("tenant_id"), s.LookUpField("id")
	if tenant == nil || id == nil || row.Kind() != reflect.Struct {
		return false, fmt.Errorf("rowsql: Insert: the row %T has no tenant_id and id", p.Row)
	}
	tv, _ := tenant.ValueOf(ctx, row)
	iv, _ := id.ValueOf(ctx, row)
	name := p.Table
	if name == "" {
		name = s.Table
	}
	var n int64
	if err := db.WithContext(ctx).Table(name).Where("tenant_id = ? AND id = ?", tv, iv).Count(&n).Error; err != nil {
		return false, r.d.Classify(err)
	}
	if n == 0 {
		return false, fmt.Errorf("%w: a unique index of %s refused the row", store.ErrUniqueViolation, name)
	}
	return false, nil
}

// Create is pipelined on PostgreSQL and on a MariaDB pool that batches
// (pipeline.Later): with the child rows and the creation hook's writes, a
// create is one round trip. Its INSERT is spelled once per model type
// (insertPlan), not by gorm per request.
func (r *rows) Create(ctx context.Context, db *gorm.DB, p store.RowInsertParams) error {
	if queued, err := r.laterInsert(ctx, db, p.Table, p.Row, r.onKey); queued || err != nil {
		return err
	}
	return pipeline.Later(db.WithContext(ctx), func(db *gorm.DB) *gorm.DB {
		return onTable(db, p.Table).Omit(clause.Associations).Create(p.Row)
	}, r.onKey)
}

func (r *rows) Read(ctx context.Context, db *gorm.DB, p store.RowReadParams) (bool, error) {
	if r.plans && !p.ForUpdate && len(p.Preload) == 0 {
		// A statement fixed per model type, with the database clock in it.
		if dest := reflect.ValueOf(p.Dest); dest.Kind() == reflect.Pointer && dest.Elem().Kind() == reflect.Struct {
			if pl := r.readPlanOf(db, p.Key.Table, dest.Elem().Type()); pl != nil {
				found, now, err := pl.read(ctx, db, r.s, p.Key, p.LiveOnly, dest.Elem())
				if p.Now != nil {
					*p.Now = now
				}
				return found, err
			}
		}
	}
	found, err := r.read(ctx, db, p)
	if err != nil || p.Now == nil {
		return found, err
	}
	// The clock after the read: after the row lock, when one was taken.
	var now store.DatabaseTime
	if err := db.WithContext(ctx).Raw("SELECT " + r.d.Now()).Row().Scan(&now); err != nil {
		return false, err
	}
	*p.Now = now.Time
	return found, nil
}

// read is Read with gorm's statements: locked reads, reads with child
// rows, and models without a read plan.
func (r *rows) read(ctx context.Context, db *gorm.DB, p store.RowReadParams) (bool, error) {
	if !p.ForUpdate && len(p.Preload) > 0 {
		// On PostgreSQL the row and its child rows in one round trip and one
		// snapshot; elsewhere (SQLite, or inside a transaction) as below.
		found, err := r.readSnapshot(ctx, db, p)
		if !errors.Is(err, store.ErrNoSnapshot) {
			return found, err
		}
	}
	for attempt := 0; ; attempt++ {
		q := db.WithContext(ctx).Table(p.Key.Table)
		if p.ForUpdate {
			q = r.d.LockRow(q)
		}
		q = preload(q, p.Preload)
		q = q.Where("tenant_id = ? AND id = ?", p.Key.Tenant, p.Key.ID)
		if p.LiveOnly {
			q = q.Where("deleted_at IS NULL")
		}
		err := q.Take(p.Dest).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return false, nil
		}
		if err != nil && p.ForUpdate {
			return false, r.onKey(err)
		}
		if err != nil || len(p.Preload) == 0 || p.ForUpdate {
			return err == nil, err
		}
		// The child rows were read by a second statement: a replace that
		// committed between the two would pair this row with another
		// version's children. Unchanged version, consistent read.
		versions, err := r.versions(ctx, db, reflect.ValueOf(p.Dest).Elem())
		if err != nil || versions == nil {
			return err == nil, err
		}
		same, err := r.versionsUnchanged(ctx, db, p.Key.Table, p.Key.Tenant, versions)
		if err != nil || same {
			return err == nil, err
		}
		if attempt == 2 {
			return false, store.ErrChangedWhileRead
		}
	}
}

// readSnapshot reads the row of p.Key and its child rows with
// [store.ReadSnapshot]: one round trip, one snapshot, so the child rows are
// those of the version read without a re-check. It returns
// [store.ErrNoSnapshot] where that cannot be done.
func (r *rows) readSnapshot(ctx context.Context, db *gorm.DB, p store.RowReadParams) (bool, error) {
	if !store.CanReadSnapshot(db) {
		return false, store.ErrNoSnapshot
	}
	s, err := r.schemaOf(db, p.Dest)
	if err != nil {
		return false, err
	}
	row := reflect.ValueOf(p.Dest).Elem()
	queries := []func(*gorm.DB) *gorm.DB{func(q *gorm.DB) *gorm.DB {
		q = q.Table(p.Key.Table).Where("tenant_id = ? AND id = ?", p.Key.Tenant, p.Key.ID)
		if p.LiveOnly {
			q = q.Where("deleted_at IS NULL")
		}
		return q.Take(p.Dest)
	}}
	for _, pl := range p.Preload {
		rel, ok := s.Relationships.Relations[pl.Field]
		if !ok || rel.Type != schema.HasMany {
			return false, store.ErrNoSnapshot
		}
		var conds []any
		where := ""
		for _, ref := range rel.References {
			var v any
			switch {
			case ref.PrimaryKey == nil:
				v = ref.PrimaryValue
			case ref.PrimaryKey.DBName == "tenant_id":
				v = p.Key.Tenant
			case ref.PrimaryKey.DBName == "id":
				v = p.Key.ID
			default:
				return false, store.ErrNoSnapshot
			}
			if where != "" {
				where += " AND "
			}
			where += quote(db, ref.ForeignKey.DBName) + " = ?"
			conds = append(conds, v)
		}
		children := rel.Field.ReflectValueOf(ctx, row).Addr().Interface()
		table, order := rel.FieldSchema.Table, pl.OrderBy
		queries = append(queries, func(q *gorm.DB) *gorm.DB {
			return q.Table(table).Where(where, conds...).Order(order).Find(children)
		})
	}
	res, err := store.ReadSnapshot(ctx, r.d, db.WithContext(ctx), queries...)
	if err != nil {
		return false, err
	}
	if errors.Is(res[0].Error, gorm.ErrRecordNotFound) {
		return false, nil
	}
	return true, nil
}

// versions returns the id and version of each row of rows, a struct or a
// slice of them; nil for a model without both, whose reads cannot be
// checked.
func (r *rows) versions(ctx context.Context, db *gorm.DB, rows reflect.Value) (map[uuid.UUID]int64, error) {
	s, err := r.schemaOf(db, rows.Addr().Interface())
	if err != nil {
		return nil, err
	}
	idField, versionField := s.LookUpField("id"), s.LookUpField("version")
	if idField == nil || versionField == nil {
		return nil, nil
	}
	n := 1
	if rows.Kind() == reflect.Slice {
		n = rows.Len()
	}
	out := make(map[uuid.UUID]int64, n)
	for i := range n {
		row := rows
		if rows.Kind() == reflect.Slice {
			row = rows.Index(i)
		}
		id, _ := idField.ValueOf(ctx, row)
		version, _ := versionField.ValueOf(ctx, row)
		uid, ok := id.(uuid.UUID)
		v, vok := version.(int64)
		if !ok || !vok {
			return nil, nil
		}
		out[uid] = v
	}
	return out, nil
}

// versionsUnchanged reports whether the rows of tenant named in versions
// still have those versions.
func (r *rows) versionsUnchanged(ctx context.Context, db *gorm.DB, table, tenant string, versions map[uuid.UUID]int64) (bool, error) {
	ids := make([]uuid.UUID, 0, len(versions))
	for id := range versions {
		ids = append(ids, id)
	}
	var now []struct {
		ID      uuid.UUID
		Version int64
	}
	if err := db.WithContext(ctx).Table(table).Select("id, version").Where("tenant_id = ? AND id IN ?", tenant, ids).
		Scan(&now).Error; err != nil {
		return false, err
	}
	if len(now) != len(versions) {
		return false, nil
	}
	for _, r := range now {
		if versions[r.ID] != r.Version {
			return false, nil
		}
	}
	return true, nil
}

func preload(q *gorm.DB, ps []store.RowPreload) *gorm.DB {
	for _, p := range ps {
		order := p.OrderBy
		q = q.Preload(p.Field, func(db *gorm.DB) *gorm.DB { return db.Order(order) })
	}
	return q
}

func (r *rows) Update(ctx context.Context, db *gorm.DB, p store.RowUpdateParams) (bool, error) {
	res := db.WithContext(ctx).Table(p.Key.Table).Select(p.Columns).Omit(clause.Associations).
		Where("tenant_id = ? AND id = ? AND version = ? AND deleted_at IS NULL", p.Key.Tenant, p.Key.ID, p.Version).
		Updates(p.Row)
	if res.Error != nil {
		return false, r.onKey(res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (r *rows) Tombstone(ctx context.Context, db *gorm.DB, p store.RowTombstoneParams) (bool, error) {
	q := db.WithContext(ctx).Table(p.Key.Table).Where("tenant_id = ? AND id = ? AND deleted_at IS NULL", p.Key.Tenant, p.Key.ID)
	if p.Version > 0 {
		q = q.Where("version = ?", p.Version)
	}
	now := gorm.Expr(r.d.Now())
	res := q.Updates(map[string]any{"deleted_at": now, "updated_at": now, "version": gorm.Expr("version + 1")})
	if res.Error != nil {
		return false, r.onKey(res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (r *rows) PurgeTombstone(ctx context.Context, db *gorm.DB, p store.RowPurgeParams) (bool, error) {
	db = db.WithContext(ctx)
	table := quote(db, p.Key.Table)
	// Child rows first (their foreign key references the row), and only
	// those of a tombstone.
	for _, c := range p.Children {
		if err := db.Exec("DELETE FROM "+quote(db, c.Table)+" WHERE tenant_id = ? AND "+quote(db, c.ParentColumn)+" = ?"+
			" AND EXISTS (SELECT 1 FROM "+table+" WHERE tenant_id = ? AND id = ? AND deleted_at IS NOT NULL AND deleted_at <= ?)",
			p.Key.Tenant, p.Key.ID, p.Key.Tenant, p.Key.ID, p.DeletedBefore).Error; err != nil {
			return false, err
		}
	}
	res := db.Exec("DELETE FROM "+table+" WHERE tenant_id = ? AND id = ? AND deleted_at IS NOT NULL AND deleted_at <= ?",
		p.Key.Tenant, p.Key.ID, p.DeletedBefore)
	return res.RowsAffected == 1, res.Error
}

// InsertChildren is pipelined on PostgreSQL and on a MariaDB pool that
// batches (pipeline.Later): nothing reads the insert's answer, so it
// travels with the transaction's next statement or its COMMIT, and a
// violation is reported there, classified the same way. Like Create's,
// its INSERT is spelled once per model type.
func (r *rows) InsertChildren(ctx context.Context, db *gorm.DB, p store.RowChildrenParams) error {
	if queued, err := r.laterInsert(ctx, db, p.Table, p.Rows, r.d.Classify); queued || err != nil {
		return err
	}
	return pipeline.Later(db.WithContext(ctx), func(db *gorm.DB) *gorm.DB {
		return db.Table(p.Table).Omit(clause.Associations).Create(p.Rows)
	}, r.d.Classify)
}

func (r *rows) DeleteChildren(ctx context.Context, db *gorm.DB, p store.RowChildrenParams) error {
	db = db.WithContext(ctx)
	return db.Exec("DELETE FROM "+quote(db, p.Table)+" WHERE tenant_id = ? AND "+quote(db, p.ParentColumn)+" = ?",
		p.Tenant, p.ParentID).Error
}

func (r *rows) List(ctx context.Context, db *gorm.DB, p store.RowListParams) error {
	for attempt := 0; ; attempt++ {
		q := preload(db.WithContext(ctx).Table(p.Table), p.Preload).
			Where("tenant_id = ? AND deleted_at IS NULL", p.Tenant)
		for _, f := range p.Filters {
			q = q.Where(clause.Eq{Column: clause.Column{Name: f.Column}, Value: f.Value})
		}
		if p.After != nil {
			q = q.Where("(created_at, id) < (?, ?)", p.After.CreatedAt, p.After.ID)
		}
		if err := q.Order("created_at DESC, id DESC").Limit(p.Limit).Find(p.Dest).Error; err != nil {
			return err
		}
		rows := reflect.ValueOf(p.Dest).Elem()
		if len(p.Preload) == 0 || rows.Len() == 0 {
			return nil
		}
		// As in Read: the page's child rows must belong to the versions read.
		versions, err := r.versions(ctx, db, rows)
		if err != nil || versions == nil {
			return err
		}
		same, err := r.versionsUnchanged(ctx, db, p.Table, p.Tenant, versions)
		if err != nil || same {
			return err
		}
		rows.SetLen(0)
		if attempt == 2 {
			return store.ErrChangedWhileRead
		}
	}
}

// stampColumns are the time columns a write stamps with a time it
// answers with ([store.Rows.TimeStep]).
var stampColumns = []string{"created_at", "updated_at"}

// TimeStep reads the step of the table's stamped columns from the catalog
// the first time (the driver's [Spelling.TimeStep]) and keeps it; while
// the table does not exist it reads it again on the next call.
func (r *rows) TimeStep(ctx context.Context, db *gorm.DB, table string) (time.Duration, error) {
	if r.s.TimeStep == nil {
		return 0, nil
	}
	if step, ok := r.steps.Load(table); ok {
		return step.(time.Duration), nil
	}
	step, err := r.s.TimeStep(ctx, db.WithContext(ctx), table, stampColumns)
	if err != nil {
		return 0, r.d.Classify(err)
	}
	if step > 0 {
		r.steps.Store(table, step)
	}
	return step, nil
}

func (r *rows) Indexes(ctx context.Context, db *gorm.DB, table string) ([][]string, error) {
	var found []struct{ Idx, Col string }
	if err := db.WithContext(ctx).Raw(r.s.Indexes, table).Scan(&found).Error; err != nil {
		return nil, r.d.Classify(err)
	}
	var out [][]string
	last := ""
	for _, f := range found {
		if f.Idx != last || len(out) == 0 {
			out = append(out, nil)
			last = f.Idx
		}
		out[len(out)-1] = append(out[len(out)-1], f.Col)
	}
	return out, nil
}

// quote quotes an identifier in the dialect of db.
func quote(db *gorm.DB, name string) string {
	var b stringWriter
	db.Dialector.QuoteTo(&b, name)
	return string(b)
}

type stringWriter []byte

func (w *stringWriter) WriteString(s string) (int, error) { *w = append(*w, s...); return len(s), nil }
func (w *stringWriter) WriteByte(c byte) error            { *w = append(*w, c); return nil }
