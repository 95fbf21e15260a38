package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// Rows is the SQL of resource rows (the tables of the PUT pattern, package
// framework/collection): one method per statement, each with its
// parameter struct, run on db, the caller's transaction (from [DB.Write])
// or the pool, so that a resource's writes commit with the caller's. Each
// driver builds it ([Driver.Rows]) from one implementation and its own
// spellings; [DB.Rows] is the one of a store.
//
// A row is a gorm model (a pointer to a struct) whose table has the
// columns tenant_id and id (the primary key), version, created_at,
// updated_at and deleted_at (NULL while live, set by [Rows.Tombstone]).
// Child rows are the rows of a has-many association of the model whose
// foreign keys are tenant_id and a column referencing id.
//
// A statement on the row of one key (Insert, Create, a Read with
// ForUpdate, Update, Tombstone) that waits past the lock timeout for that
// row's lock returns its error marked with [KeyLocked]: a concurrent
// request with the same ID holds it. Errors are classified
// ([DB.Classify]): a unique index other than the primary key that refuses
// a row is [ErrUniqueViolation], a text the database cannot store
// [ErrUnstorableText].
//
// Every driver passes the rows contract of storetest. Like [Driver], it
// serves the framework's own packages and may gain methods in any release.
type Rows interface {
	// Insert writes p.Row unless a row with its (tenant_id, id) exists:
	// INSERT … ON CONFLICT (tenant_id, id) DO NOTHING, or its equivalent.
	// It reports whether the row was inserted. A concurrent insert of the
	// same key makes it wait for that transaction and then report false.
	Insert(ctx context.Context, db *gorm.DB, p RowInsertParams) (bool, error)
	// Create writes p.Row (a pointer to a model, or to a non-empty slice of
	// them) as new rows with a plain INSERT, for a key the caller has just
	// read as absent or expects to be. It may defer the statement to the
	// transaction's next round trip, with its next statement or its
	// COMMIT: nothing may need its answer. A row of the key that exists by
	// then (a concurrent create), like a violation of another unique
	// index, fails that statement or [DB.Write] with an error wrapping
	// [ErrUniqueViolation], and the transaction does not commit. Its
	// associations are not written.
	Create(ctx context.Context, db *gorm.DB, p RowInsertParams) error
	// Read loads the row of p.Key into p.Dest (tombstones too unless
	// p.LiveOnly), under a row lock when p.ForUpdate, and the child rows
	// named in p.Preload, which are those of the version read (not of a
	// replace that committed in between), and sets *p.Now, when p.Now is
	// set, to the database clock. It reports false when there is no such
	// row. A read with child rows whose rows kept changing while it read
	// (it tries three times) fails with [ErrChangedWhileRead] rather than
	// pair a version with another version's child rows.
	Read(ctx context.Context, db *gorm.DB, p RowReadParams) (bool, error)
	// Update writes every column of p.Row named in p.Columns to the live row
	// of p.Key, only while its version is still p.Version (a fenced write).
	// It reports whether the row was updated.
	Update(ctx context.Context, db *gorm.DB, p RowUpdateParams) (bool, error)
	// Tombstone sets deleted_at and updated_at to the database clock of its
	// statement and bumps the version of the live row of p.Key (only while
	// its version is p.Version, when that is positive). It reports whether
	// a row was tombstoned.
	Tombstone(ctx context.Context, db *gorm.DB, p RowTombstoneParams) (bool, error)
	// PurgeTombstone deletes the row of p.Key and its child rows, only when
	// the row is a tombstone deleted before p.DeletedBefore. It reports
	// whether a row was deleted.
	PurgeTombstone(ctx context.Context, db *gorm.DB, p RowPurgeParams) (bool, error)
	// InsertChildren inserts the child rows in p.Rows (a pointer to a
	// non-empty slice). It may defer the statement as Create does; its
	// error, classified, is then returned by the transaction's next
	// statement or by [DB.Write].
	InsertChildren(ctx context.Context, db *gorm.DB, p RowChildrenParams) error
	// DeleteChildren deletes the child rows of one resource.
	DeleteChildren(ctx context.Context, db *gorm.DB, p RowChildrenParams) error
	// List loads into p.Dest (a pointer to a slice) up to p.Limit live rows
	// of p.Tenant matching p.Filters, newest first (created_at, id
	// descending), after p.After when set, each with the child rows of the
	// version read; like Read, it fails with [ErrChangedWhileRead] rather
	// than pair a version with another version's child rows.
	List(ctx context.Context, db *gorm.DB, p RowListParams) error
	// TimeStep returns the coarsest step in which the columns created_at
	// and updated_at of table, the times a write stamps, keep a time
	// ([TimeStepOf] their fractional digits), or 0 where they keep the
	// time they are given whole (SQLite's text) or the table does not
	// exist. The table is found as a statement names it ("schema.table",
	// or a name on the connection's search path or database). A time column of fewer digits than the
	// database clock's (MariaDB's DATETIME(3), which gorm's AutoMigrate
	// makes on an application's own handle; PostgreSQL's timestamp(3))
	// stores a time cut (MariaDB truncates, PostgreSQL rounds): a write
	// that answers with the time it stamped cuts it to this step first, so
	// that the answer is what every later read reads. A step once read is
	// kept for the table.
	TimeStep(ctx context.Context, db *gorm.DB, table string) (time.Duration, error)
	// Indexes returns the column list of each index of table, the primary
	// key's among them, each in the index's column order: what
	// storetest.CheckTable checks a resource table by.
	Indexes(ctx context.Context, db *gorm.DB, table string) ([][]string, error)
}

// RowsConfig configures [Driver.Rows]. The zero value is ready to use.
type RowsConfig struct {
	// DisablePlans builds every statement with gorm at each call
	// ([Config.DisableRowPlans]). Defaults to false.
	DisablePlans bool
}

// RowKey names one resource row.
type RowKey struct {
	Table  string
	Tenant string
	ID     uuid.UUID
}

// RowInsertParams are the arguments of [Rows.Insert] and [Rows.Create].
type RowInsertParams struct {
	// Table is the table written; the model's own (its gorm table name)
	// when empty.
	Table string
	// Row is a pointer to the model with its columns filled in (Create:
	// or a pointer to a non-empty slice of models). Its associations are
	// not written.
	Row any
}

// RowReadParams are the arguments of [Rows.Read].
type RowReadParams struct {
	Key RowKey
	// Dest is a pointer to the model.
	Dest any
	// ForUpdate takes a row lock (SELECT … FOR UPDATE; on SQLite the write
	// transaction already holds the database lock).
	ForUpdate bool
	// LiveOnly skips tombstones.
	LiveOnly bool
	// Preload loads child rows.
	Preload []RowPreload
	// Now, when set, receives the database clock ([Driver.Now]) as of the
	// read, in UTC, whether or not a row was found. An unlocked read of
	// the row alone carries it in its own statement; others read it by
	// one more statement after the read.
	Now *time.Time
}

// RowPreload names a has-many association of a model to load with it.
type RowPreload struct {
	// Field is the model's association field ("Items").
	Field string
	// OrderBy orders the child rows ("position").
	OrderBy string
}

// RowUpdateParams are the arguments of [Rows.Update].
type RowUpdateParams struct {
	Key RowKey
	// Version is the version the write is fenced on.
	Version int64
	// Row is a pointer to the model holding the new values.
	Row any
	// Columns names the columns written.
	Columns []string
}

// RowTombstoneParams are the arguments of [Rows.Tombstone].
type RowTombstoneParams struct {
	Key RowKey
	// Version, when positive, fences the write on the version read.
	Version int64
}

// RowPurgeParams are the arguments of [Rows.PurgeTombstone].
type RowPurgeParams struct {
	Key RowKey
	// DeletedBefore is the retention cutoff on the database clock: only a
	// tombstone deleted before it is purged (one deleted at it, to the
	// millisecond, may be kept: SQLite compares its times as text), so that
	// a purge decided on a read cannot delete a newer tombstone written
	// meanwhile.
	DeletedBefore time.Time
	// Children are the child tables whose rows go with the tombstone.
	Children []RowChildTable
}

// RowChildTable names a child table and its keys: tenant_id and
// ParentColumn (the parent's id).
type RowChildTable struct {
	Table        string
	ParentColumn string
}

// RowChildrenParams are the arguments of [Rows.InsertChildren] and
// [Rows.DeleteChildren].
type RowChildrenParams struct {
	RowChildTable
	Tenant   string
	ParentID uuid.UUID
	// Rows is a pointer to a non-empty slice of child rows with their keys
	// set (InsertChildren only).
	Rows any
}

// RowListParams are the arguments of [Rows.List].
type RowListParams struct {
	Table  string
	Tenant string
	// Filters are equality conditions on columns, each backed by an index
	// that starts with tenant_id.
	Filters []RowFilter
	// After, when set, is the last row of the previous page.
	After *RowPosition
	Limit int
	// Dest is a pointer to a slice of models.
	Dest    any
	Preload []RowPreload
}

// RowFilter is one equality condition of a list.
type RowFilter struct {
	Column string
	Value  string
}

// RowPosition is a position in the newest-first order of a list.
type RowPosition struct {
	CreatedAt time.Time
	ID        uuid.UUID
}

// TimeStepOf is the step of a time with digits fractional digits of a
// second: time.Second for 0, time.Millisecond for 3, time.Microsecond
// for 6, time.Nanosecond from 9 on.
func TimeStepOf(digits int) time.Duration {
	step := time.Second
	for range min(max(digits, 0), 9) {
		step /= 10
	}
	return step
}
