package storepg

import (
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/recordsql"
)

// Records returns the idempotency records' SQL on PostgreSQL: the
// portable statements, with the clock statement_timestamp() (when the
// statement arrived, not the transaction's start, which a stalled
// transaction would keep old) and fences from a sequence. Get is a
// numbered statement with no gorm statement built.
func (Driver) Records(cfg store.RecordsConfig) store.Records {
	return recordsql.New(records, Driver{}.Classify, cfg)
}

var records = recordsql.Spelling{
	Now:        "(statement_timestamp() + CAST(@off AS interval))",
	Plus:       "(statement_timestamp() + CAST(@off AS interval) + CAST(@%s AS interval))",
	NextFence:  "nextval('idempotency_records_fence_seq')",
	AgeSeconds: "CAST(EXTRACT(EPOCH FROM (statement_timestamp() + CAST(@off AS interval) - %s)) AS DOUBLE PRECISION)",
	Duration:   func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + " microseconds" },
	Numbered:   true,
	Rows:       Driver{},
}
