package storepg

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/rowsql"
)

// Rows returns the resource rows' statements on PostgreSQL: numbered
// placeholders, the read of a row by its key through pgx with its ID as
// the 16 bytes it is, and the time columns' precision from the catalog.
func (d Driver) Rows(cfg store.RowsConfig) store.Rows { return rowsql.New(d, rows, cfg) }

var rows = rowsql.Spelling{
	Numbered: true,
	UUIDArg:  uuidArg,
	QueryRow: Driver{},
	TimeStep: timeStep,
	Indexes: `SELECT i.relname AS idx, a.attname AS col
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class c ON c.oid = x.indrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
WHERE c.relname = ? AND n.nspname = current_schema()
ORDER BY i.relname, k.ord`,
}

// uuidArg returns id as a pgtype.UUID, which pgx encodes as its 16 bytes
// for a uuid parameter on every connection, one [registerTypes] has not
// taught (a pool connection that has served no write transaction) too,
// and through its string for a text one. The read of a row by its key,
// which runs on the pool, sends its ID so.
func uuidArg(id uuid.UUID) any { return pgtype.UUID{Bytes: id, Valid: true} }

// timeStep reads the precision of the timestamp columns of table from the
// catalog: timestamptz, and timestamp, keep microseconds unless declared
// with fewer digits (timestamptz(3)), which PostgreSQL would store
// rounded. The table is found as a statement names it (on the
// search_path, or "schema.table").
func timeStep(ctx context.Context, db *gorm.DB, table string, columns []string) (time.Duration, error) {
	var digits sql.NullInt64
	err := db.WithContext(ctx).Raw("SELECT MIN(CASE WHEN atttypmod < 0 THEN 6 ELSE atttypmod END) FROM pg_catalog.pg_attribute"+
		" WHERE attrelid = to_regclass(?) AND attname IN ? AND NOT attisdropped"+
		" AND atttypid IN ('timestamptz'::regtype, 'timestamp'::regtype)",
		pgx.Identifier(strings.Split(table, ".")).Sanitize(), columns).Row().Scan(&digits)
	if err != nil || !digits.Valid {
		return 0, err
	}
	return store.TimeStepOf(int(digits.Int64)), nil
}
