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
func (Driver) Records() store.Records { return recordsql.New(records, Driver{}.Classify) }

// WithRecordSpelling is the accessor through which the framework's tests
// move the database clock that the records read
// (storetest.ShiftRecordClock; [recordsql.Respellable]): d, with the
// records of edit(their spelling).
func (d Driver) WithRecordSpelling(edit func(recordsql.Spelling) recordsql.Spelling) store.Driver {
	if edit == nil {
		return d
	}
	return respelled{d, recordsql.New(edit(records), d.Classify)}
}

// respelled is a Driver with the records of another spelling: every other
// method is the Driver's.
type respelled struct {
	Driver
	records store.Records
}

func (r respelled) Records() store.Records { return r.records }

var _ recordsql.Respellable = Driver{}

var records = recordsql.Spelling{
	Clock: func(shifts ...string) string {
		clock := "statement_timestamp()"
		for _, d := range shifts {
			clock = "(" + clock + " + CAST(@" + d + " AS interval))"
		}
		return clock
	},
	NextFence:  "nextval('idempotency_records_fence_seq')",
	AgeSeconds: "CAST(EXTRACT(EPOCH FROM ({now} - {time})) AS DOUBLE PRECISION)",
	Duration:   func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + " microseconds" },
	Numbered:   true,
	Rows:       Driver{},
}
