package rowsql

import (
	"context"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// Spelling is what the statements of resource rows need to know of one
// database beyond its [store.Driver] (the clock, the row lock, the
// classification of errors, the snapshot read): each driver declares its
// own. Everything else is written once, in this package.
type Spelling struct {
	// Numbered: the database's placeholders are numbered ($1, $2, …:
	// PostgreSQL), not ? (SQLite, the MySQL family). The statements this
	// package spells itself (the plans) use them.
	Numbered bool
	// CompilesEachStatement: the database compiles a statement's text
	// every time it runs it (SQLite, whose pure-Go driver keeps no
	// compiled statement). The read of a row by its key is then a plain
	// WHERE on the key, which compiles in a fraction of the time of the
	// outer join that returns the clock on a miss too, and a miss reads
	// the clock with a second statement: a replay, which finds its row,
	// costs one short statement, and only a new ID pays two.
	CompilesEachStatement bool
	// SkipsAnyUniqueConflict: the database's "insert unless this key is
	// taken" skips a row that conflicts on any unique index, not the
	// primary key alone (MySQL's ON DUPLICATE KEY UPDATE, which gorm's
	// OnConflict DoNothing is there), so that a resource's own unique
	// column (an email) would read as "the ID exists". Insert then looks
	// the key up after a skipped row. It keeps the upsert rather than a
	// plain INSERT whose duplicate-key error it would read: a failed
	// INSERT leaves a shared lock on the row, and two requests that then
	// lock it for update deadlock, where the upsert's exclusive lock makes
	// them queue.
	SkipsAnyUniqueConflict bool
	// UUIDArg, when set, is how the read of a row by its key passes the
	// ID: a value the database's driver encodes directly, for a uuid
	// column and a text one (PostgreSQL: pgx encodes a uuid.UUID through
	// its driver.Valuer, a string, on a connection no write transaction
	// has taught otherwise, as a pool connection that only serves reads).
	// Defaults to the uuid.UUID.
	UUIDArg func(id uuid.UUID) any
	// QueryRow, when set, runs the read of a row by its key on the pool
	// ([store.QueryRow]).
	QueryRow store.RowQuerier
	// TimeStep, when set, reads the coarsest step in which the columns of
	// table keep a time ([store.Rows.TimeStep]) from the database's
	// catalog; where it is nil the database keeps a time as it is given
	// (SQLite's text).
	TimeStep func(ctx context.Context, db *gorm.DB, table string, columns []string) (time.Duration, error)
	// Indexes is the query of the indexes of the table named by its one
	// placeholder (?), as a statement names it, from the database's
	// catalog: one row per index column, with the columns idx (the index's
	// name) and col (the column's), in the order of each index's columns.
	Indexes string
}
