package collection

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/pipeline"
)

// RowStore is the one seam for the SQL of resource rows: every statement the
// PUT engine issues against a resource table goes through it. Each method
// runs on the *gorm.DB it is given (a transaction or the pool), so it can
// join a caller's transaction. Models are pointers to structs embedding
// [System] (or, for lists and children, pointers to slices of them).
//
// A statement on the row of one key (Insert, Create, a Read with
// ForUpdate, Update, Tombstone) that waits past the lock timeout for that
// row's lock returns its error marked with [store.KeyLocked]: a concurrent
// request with the same ID holds it, and the client is told 409
// request_in_progress. Any other lock timeout is 503 unavailable.
//
// Implementations must pass the contract suite in
// framework/rowstoretest.
type RowStore interface {
	// Insert writes p.Row unless a row with its (tenant_id, id) exists:
	// INSERT … ON CONFLICT (tenant_id, id) DO NOTHING. It reports whether
	// the row was inserted. A concurrent insert of the same key makes it
	// wait for that transaction and then report false. A violation of
	// another unique index is returned as [ErrUniqueViolation].
	Insert(ctx context.Context, db *gorm.DB, p InsertRowParams) (bool, error)
	// Create writes p.Row as a new row with a plain INSERT, for a key the
	// caller has just read as absent. It may defer the statement to the
	// transaction's next round trip ([pipeline.Later]). A row of the key that
	// exists by then (a concurrent create), like a violation of another
	// unique index, fails that statement or [store.DB.Write] with an error
	// wrapping [ErrUniqueViolation], and the transaction does not commit;
	// the caller then takes the Insert path. Its associations are not
	// written.
	Create(ctx context.Context, db *gorm.DB, p InsertRowParams) error
	// Read loads the row of p.Key into p.Dest (tombstones too unless
	// p.LiveOnly), under a row lock when p.ForUpdate, and the child rows
	// named in p.Preload, which must be those of the version read (not of a
	// replace that committed in between), and sets *p.Now, when p.Now is
	// set, to the database clock. It reports false when there is no such
	// row.
	Read(ctx context.Context, db *gorm.DB, p ReadRowParams) (bool, error)
	// Update writes every column of p.Row named in p.Columns to the live row
	// of p.Key, only while its version is still p.Version (a fenced write).
	// It reports whether the row was updated.
	Update(ctx context.Context, db *gorm.DB, p UpdateRowParams) (bool, error)
	// Tombstone sets deleted_at and updated_at to the database clock of its
	// statement and bumps the version of the live row of p.Key (only while
	// its version is p.Version, when that is positive). It reports whether
	// a row was tombstoned.
	Tombstone(ctx context.Context, db *gorm.DB, p TombstoneParams) (bool, error)
	// PurgeTombstone deletes the row of p.Key and its child rows, only when
	// the row is a tombstone deleted before p.DeletedBefore. It
	// reports whether a row was deleted.
	PurgeTombstone(ctx context.Context, db *gorm.DB, p PurgeParams) (bool, error)
	// InsertChildren inserts the child rows in p.Rows (a pointer to a
	// slice) into p.Table. It may defer the statement to the transaction's
	// next round trip ([pipeline.Later]); its error, wrapped as Insert's, is
	// then returned by that statement or by [store.DB.Write].
	InsertChildren(ctx context.Context, db *gorm.DB, p ChildRowsParams) error
	// DeleteChildren deletes the child rows of one resource.
	DeleteChildren(ctx context.Context, db *gorm.DB, p ChildRowsParams) error
	// List loads into p.Dest (a pointer to a slice) up to p.Limit live rows
	// of p.Tenant matching p.Filters, newest first (created_at, id
	// descending), after p.After when set, each with the child rows of the
	// version read. When rows keep changing while it reads (it tries three
	// times), it fails with a 409 request_in_progress error rather than
	// pair a version with another version's child rows; so does Read.
	List(ctx context.Context, db *gorm.DB, p ListRowsParams) error
}

// ErrUniqueViolation is returned (wrapped) by [RowStore.Insert] and
// [RowStore.Update] when a unique index other than the primary key refuses
// the row (a customer's email, say). It is [store.ErrUniqueViolation].
var ErrUniqueViolation = store.ErrUniqueViolation

// ErrUnstorableText is returned (wrapped) by the writing methods of
// [RowStore] when the database refuses a text value it cannot store (a NUL
// character in PostgreSQL text). It is [store.ErrUnstorableText].
var ErrUnstorableText = store.ErrUnstorableText

// RowKey names one resource row.
type RowKey struct {
	Table  string
	Tenant string
	ID     uuid.UUID
}

// InsertRowParams are the arguments of [RowStore.Insert].
type InsertRowParams struct {
	Table string
	// Row is a pointer to the model with its [System] columns filled in.
	// Its associations (child rows) are not written.
	Row any
}

// ReadRowParams are the arguments of [RowStore.Read].
type ReadRowParams struct {
	Key RowKey
	// Dest is a pointer to the model.
	Dest any
	// ForUpdate takes a row lock (SELECT … FOR UPDATE; on SQLite the write
	// transaction already holds the database lock).
	ForUpdate bool
	// LiveOnly skips tombstones.
	LiveOnly bool
	// Preload loads child rows: association field name → ORDER BY.
	Preload []Preload
	// Now, when set, receives the database clock ([store.Driver.Now]) as
	// of the read, in UTC, whether or not a row was found: the time that
	// the PUT engine judges the row by and stamps its writes with. An
	// unlocked read of the row alone carries it in its own statement;
	// others read it by one more statement after the read.
	Now *time.Time
}

// Preload names a has-many association of a model to load with it.
type Preload struct {
	// Field is the model's association field ("Items").
	Field string
	// OrderBy orders the child rows ("position").
	OrderBy string
}

// UpdateRowParams are the arguments of [RowStore.Update].
type UpdateRowParams struct {
	Key RowKey
	// Version is the version the write is fenced on.
	Version int64
	// Row is a pointer to the model holding the new values.
	Row any
	// Columns names the columns written.
	Columns []string
}

// TombstoneParams are the arguments of [RowStore.Tombstone].
type TombstoneParams struct {
	Key RowKey
	// Version, when positive, fences the write on the version read.
	Version int64
}

// PurgeParams are the arguments of [RowStore.PurgeTombstone].
type PurgeParams struct {
	Key RowKey
	// DeletedBefore is the retention cutoff on the database clock: only a
	// tombstone deleted before it is purged (one deleted at it, to the
	// millisecond, may be kept: SQLite compares its times as text), so that
	// a purge decided on a read cannot delete a newer tombstone written
	// meanwhile (the ID would come back within its retention).
	DeletedBefore time.Time
	// Children are the child tables whose rows go with the tombstone.
	Children []ChildTable
}

// ChildTable names a child table and its keys: tenant_id and ParentColumn
// (the parent's id).
type ChildTable struct {
	Table        string
	ParentColumn string
}

// ChildRowsParams are the arguments of [RowStore.InsertChildren] and
// [RowStore.DeleteChildren].
type ChildRowsParams struct {
	ChildTable
	Tenant   string
	ParentID uuid.UUID
	// Rows is a pointer to a non-empty slice of child rows with their keys
	// set (InsertChildren only).
	Rows any
}

// ListRowsParams are the arguments of [RowStore.List].
type ListRowsParams struct {
	Table  string
	Tenant string
	// Filters are equality conditions on columns, each backed by an index
	// that starts with tenant_id.
	Filters []ColumnFilter
	// After, when set, is the last row of the previous page.
	After *ListPosition
	Limit int
	// Dest is a pointer to a slice of models.
	Dest    any
	Preload []Preload
}

// ColumnFilter is one equality condition of a list.
type ColumnFilter struct {
	Column string
	Value  string
}

// ListPosition is a position in the newest-first order of a list.
type ListPosition struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// NewRowStore returns the RowStore on the database of d, the one every collection
// uses unless its [Resource.Rows] says otherwise.
func NewRowStore(d store.Driver) RowStore { return gormRowStore{driver: d} }

var _ RowStore = gormRowStore{}

// gormRowStore writes the SQL through gorm; what differs between
// databases comes from the [store.Driver]: row locks, the clock, and which
// errors are a unique violation or an unstorable text (Classify).
type gormRowStore struct{ driver store.Driver }

// compiles reports that the database compiles every statement each time
// ([compilingDriver]).
func (s gormRowStore) compiles() bool {
	d, ok := s.driver.(compilingDriver)
	return ok && d.CompilesEachStatement()
}

var keyColumns = []clause.Column{{Name: "tenant_id"}, {Name: "id"}}

func (s gormRowStore) Insert(ctx context.Context, db *gorm.DB, p InsertRowParams) (bool, error) {
	res := db.WithContext(ctx).Table(p.Table).Omit(clause.Associations).
		Clauses(clause.OnConflict{Columns: keyColumns, DoNothing: true}).Create(p.Row)
	if res.Error != nil {
		return false, s.onKey(res.Error)
	}
	if res.RowsAffected == 1 {
		return true, nil
	}
	if d, ok := s.driver.(anyKeyConflicts); ok && d.SkipsAnyUniqueConflict() {
		// The row was skipped for a conflict on some unique index, and
		// the conflicting row is locked: the key's own row, or another
		// row that holds the resource's unique value.
		row, ok := p.Row.(interface{ SystemColumns() *System })
		if !ok {
			return false, fmt.Errorf("collection: Insert into %s: the row %T embeds no collection.System", p.Table, p.Row)
		}
		sys := row.SystemColumns()
		var n int64
		if err := db.WithContext(ctx).Table(p.Table).Where("tenant_id = ? AND id = ?", sys.TenantID, sys.ID).Count(&n).Error; err != nil {
			return false, s.driver.Classify(err)
		}
		if n == 0 {
			return false, fmt.Errorf("%w: a unique index of %s refused the row", ErrUniqueViolation, p.Table)
		}
	}
	return false, nil
}

// anyKeyConflicts is implemented by a [store.Driver] whose database cannot
// insert "unless this key is taken" for one unique key alone: MySQL's ON
// DUPLICATE KEY UPDATE (gorm's OnConflict DoNothing there) skips a row that
// conflicts on any unique index, so that a resource's own unique column
// (an email) would read as "the ID exists". [gormRowStore.Insert] then
// looks the key up after a skipped row. It keeps the upsert rather than
// a plain INSERT whose duplicate-key error it would read: a failed INSERT
// leaves a shared lock on the row, and two requests that then lock it for
// update deadlock, where the upsert's exclusive lock makes them queue.
type anyKeyConflicts interface {
	// SkipsAnyUniqueConflict reports that the database's "insert unless
	// present" skips a conflict on any unique index.
	SkipsAnyUniqueConflict() bool
}

// Create is pipelined on PostgreSQL and on a MariaDB pool that batches
// ([pipeline.Later]): with the child rows and the creation hook's writes,
// a create is one round trip. Its INSERT
// is spelled once per model type (insertPlan), not by gorm per request.
func (s gormRowStore) Create(ctx context.Context, db *gorm.DB, p InsertRowParams) error {
	if queued, err := laterInsert(ctx, db, p.Table, p.Row, s.onKey); queued || err != nil {
		return err
	}
	return pipeline.Later(db.WithContext(ctx), func(db *gorm.DB) *gorm.DB {
		return db.Table(p.Table).Omit(clause.Associations).Create(p.Row)
	}, s.onKey)
}

// onKey classifies err, the error of a statement on one row by its key,
// and marks a wait past the lock timeout for that row as the key's
// ([store.KeyLocked]).
func (s gormRowStore) onKey(err error) error { return store.KeyLocked(s.driver.Classify(err)) }

func (s gormRowStore) Read(ctx context.Context, db *gorm.DB, p ReadRowParams) (bool, error) {
	if !p.ForUpdate && len(p.Preload) == 0 {
		// A statement fixed per model type, with the database clock in it.
		if dest := reflect.ValueOf(p.Dest); dest.Kind() == reflect.Pointer && dest.Elem().Kind() == reflect.Struct {
			if pl := readPlanOf(db, p.Key.Table, dest.Elem().Type(), s.driver.Now(), s.compiles()); pl != nil {
				found, now, err := pl.read(ctx, db, s.driver, p.Key, p.LiveOnly, dest.Elem())
				if p.Now != nil {
					*p.Now = now
				}
				return found, err
			}
		}
	}
	found, err := s.read(ctx, db, p)
	if err != nil || p.Now == nil {
		return found, err
	}
	// The clock after the read: after the row lock, when one was taken.
	var now store.DatabaseTime
	if err := db.WithContext(ctx).Raw("SELECT " + s.driver.Now()).Row().Scan(&now); err != nil {
		return false, err
	}
	*p.Now = now.Time
	return found, nil
}

// read is Read with gorm's statements: locked reads, reads with child
// rows, and models without a read plan.
func (s gormRowStore) read(ctx context.Context, db *gorm.DB, p ReadRowParams) (bool, error) {
	if !p.ForUpdate && len(p.Preload) > 0 {
		// On PostgreSQL the row and its child rows in one round trip and one
		// snapshot; elsewhere (SQLite, or inside a transaction) as below.
		found, err := s.readSnapshot(ctx, db, p)
		if !errors.Is(err, store.ErrNoSnapshot) {
			return found, err
		}
	}
	for attempt := 0; ; attempt++ {
		q := db.WithContext(ctx).Table(p.Key.Table)
		if p.ForUpdate {
			q = s.driver.LockRow(q)
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
			return false, s.onKey(err)
		}
		if err != nil || len(p.Preload) == 0 || p.ForUpdate {
			return err == nil, err
		}
		// The child rows were read by a second statement: a replace that
		// committed between the two would pair this row with another
		// version's children. Unchanged version, consistent read.
		dest, ok := p.Dest.(Row)
		if !ok {
			return true, nil
		}
		row := dest.SystemColumns()
		same, err := s.versionsUnchanged(ctx, db, p.Key.Table, p.Key.Tenant, map[uuid.UUID]int64{row.ID: row.Version})
		if err != nil || same {
			return err == nil, err
		}
		if attempt == 2 {
			return false, errChangedWhileRead
		}
	}
}

// readSnapshot reads the row of p.Key and its child rows with
// [store.ReadSnapshot]: one round trip, one snapshot, so the child rows are
// those of the version read without a re-check. It returns
// [store.ErrNoSnapshot] where that cannot be done.
func (s gormRowStore) readSnapshot(ctx context.Context, db *gorm.DB, p ReadRowParams) (bool, error) {
	if !store.CanReadSnapshot(db) {
		return false, store.ErrNoSnapshot
	}
	parsed := &gorm.Statement{DB: db}
	if err := parsed.Parse(p.Dest); err != nil {
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
		rel, ok := parsed.Schema.Relationships.Relations[pl.Field]
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
	res, err := store.ReadSnapshot(ctx, s.driver, db.WithContext(ctx), queries...)
	if err != nil {
		return false, err
	}
	if errors.Is(res[0].Error, gorm.ErrRecordNotFound) {
		return false, nil
	}
	return true, nil
}

// errChangedWhileRead: the rows kept changing between the read of a row
// and the read of its child rows. A read never pairs a version with
// another version's child rows: it answers 409 request_in_progress, which
// a client retries.
var errChangedWhileRead = framework.Errorf(wire.CodeRequestInProgress, "the resource changed while it was read; retry")

// versionsUnchanged reports whether the rows of tenant named in versions
// still have those versions.
func (s gormRowStore) versionsUnchanged(ctx context.Context, db *gorm.DB, table, tenant string, versions map[uuid.UUID]int64) (bool, error) {
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

func preload(q *gorm.DB, ps []Preload) *gorm.DB {
	for _, p := range ps {
		order := p.OrderBy
		q = q.Preload(p.Field, func(db *gorm.DB) *gorm.DB { return db.Order(order) })
	}
	return q
}

func (s gormRowStore) Update(ctx context.Context, db *gorm.DB, p UpdateRowParams) (bool, error) {
	res := db.WithContext(ctx).Table(p.Key.Table).Select(p.Columns).Omit(clause.Associations).
		Where("tenant_id = ? AND id = ? AND version = ? AND deleted_at IS NULL", p.Key.Tenant, p.Key.ID, p.Version).
		Updates(p.Row)
	if res.Error != nil {
		return false, s.onKey(res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (s gormRowStore) Tombstone(ctx context.Context, db *gorm.DB, p TombstoneParams) (bool, error) {
	q := db.WithContext(ctx).Table(p.Key.Table).Where("tenant_id = ? AND id = ? AND deleted_at IS NULL", p.Key.Tenant, p.Key.ID)
	if p.Version > 0 {
		q = q.Where("version = ?", p.Version)
	}
	now := gorm.Expr(s.driver.Now())
	res := q.Updates(map[string]any{"deleted_at": now, "updated_at": now, "version": gorm.Expr("version + 1")})
	if res.Error != nil {
		return false, s.onKey(res.Error)
	}
	return res.RowsAffected == 1, nil
}

func (s gormRowStore) PurgeTombstone(ctx context.Context, db *gorm.DB, p PurgeParams) (bool, error) {
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
// batches ([pipeline.Later]): nothing reads
// the insert's answer, so it travels with the transaction's next statement
// or its COMMIT, and a violation is reported there, wrapped the same way.
// Like Create's, its INSERT is spelled once per model type.
func (s gormRowStore) InsertChildren(ctx context.Context, db *gorm.DB, p ChildRowsParams) error {
	if queued, err := laterInsert(ctx, db, p.Table, p.Rows, s.driver.Classify); queued || err != nil {
		return err
	}
	return pipeline.Later(db.WithContext(ctx), func(db *gorm.DB) *gorm.DB {
		return db.Table(p.Table).Omit(clause.Associations).Create(p.Rows)
	}, s.driver.Classify)
}

func (s gormRowStore) DeleteChildren(ctx context.Context, db *gorm.DB, p ChildRowsParams) error {
	db = db.WithContext(ctx)
	return db.Exec("DELETE FROM "+quote(db, p.Table)+" WHERE tenant_id = ? AND "+quote(db, p.ParentColumn)+" = ?",
		p.Tenant, p.ParentID).Error
}

func (s gormRowStore) List(ctx context.Context, db *gorm.DB, p ListRowsParams) error {
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
		versions := make(map[uuid.UUID]int64, rows.Len())
		for i := range rows.Len() {
			r, ok := rows.Index(i).Addr().Interface().(Row)
			if !ok {
				return nil
			}
			versions[r.SystemColumns().ID] = r.SystemColumns().Version
		}
		same, err := s.versionsUnchanged(ctx, db, p.Table, p.Tenant, versions)
		if err != nil || same {
			return err
		}
		rows.SetLen(0)
		if attempt == 2 {
			return errChangedWhileRead
		}
	}
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
