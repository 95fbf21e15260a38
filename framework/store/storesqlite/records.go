package storesqlite

import (
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/recordsql"
)

// Records returns the idempotency records' SQL on SQLite: the portable
// statements, with the clock 'now' (fixed for one statement), times as
// UTC text with milliseconds of one fixed width, so that they compare as
// text, and fences from idempotency_fence, advanced by the table's
// triggers.
func (Driver) Records(cfg store.RecordsConfig) store.Records {
	return recordsql.New(records, Driver{}.Classify, cfg)
}

var records = recordsql.Spelling{
	Now:       "strftime('%Y-%m-%d %H:%M:%f', 'now', @off)",
	Plus:      "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', @off, @%s)",
	NextFence: "(SELECT last + 1 FROM idempotency_fence WHERE id = 1)",
	// Both times have milliseconds; julianday's double (days since 4714
	// BC) carries about 20 µs, so the difference is rounded back to the
	// millisecond (10 s would read 9.999986).
	AgeSeconds: "round((julianday('now', @off) - julianday(%s)) * 86400.0, 3)",
	Duration:   func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + " seconds" },
	// A replay's read of its record goes straight to the connection,
	// numbered ($n, which SQLite takes), with no gorm statement built.
	Numbered: true,
}
