package storemysql

import (
	"context"
	"database/sql"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/rowsql"
)

// Rows returns the resource rows' statements on the MySQL family. ON
// DUPLICATE KEY UPDATE, its only "insert unless present", skips a row that
// conflicts on any unique index: Insert then looks the key up to tell its
// own key from a resource's unique column. The time columns' precision
// comes from information_schema.
func (d Driver) Rows(cfg store.RowsConfig) store.Rows { return rowsql.New(d, rows, cfg) }

var rows = rowsql.Spelling{
	SkipsAnyUniqueConflict: true,
	TimeStep:               timeStep,
	Indexes: `SELECT index_name AS idx, column_name AS col FROM information_schema.statistics
WHERE table_schema = DATABASE() AND table_name = ? ORDER BY index_name, seq_in_index`,
}

// timeStep reads the fractional digits of the DATETIME (or TIMESTAMP)
// columns of table from information_schema: gorm's AutoMigrate makes
// DATETIME(3) on an application's own handle ([Driver.Open]'s makes
// DATETIME(6)), which MariaDB would store truncated to milliseconds.
// A table named "db.table" is looked up in that database, any other in
// the connection's.
func timeStep(ctx context.Context, db *gorm.DB, table string, columns []string) (time.Duration, error) {
	database, name := "", table
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		database, name = table[:i], table[i+1:]
	}
	var digits sql.NullInt64
	err := db.WithContext(ctx).Raw("SELECT MIN(DATETIME_PRECISION) FROM information_schema.COLUMNS"+
		" WHERE TABLE_SCHEMA = COALESCE(NULLIF(?, ''), DATABASE()) AND TABLE_NAME = ? AND COLUMN_NAME IN ?",
		database, name, columns).Row().Scan(&digits)
	if err != nil || !digits.Valid {
		return 0, err
	}
	return store.TimeStepOf(int(digits.Int64)), nil
}
