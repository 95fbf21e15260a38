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
	// 'now' and its modifiers: a duration is "+N seconds".
	Clock: func(shifts ...string) string {
		clock := "strftime('%Y-%m-%d %H:%M:%f', 'now'"
		for _, d := range shifts {
			clock += ", @" + d
		}
		return clock + ")"
	},
	NextFence: "(SELECT last + 1 FROM idempotency_fence WHERE id = 1)",
	// Both times have milliseconds; julianday's double (days since 4714
	// BC) carries about 20 µs, so the difference is rounded back to the
	// millisecond (10 s would read 9.999986).
	AgeSeconds: "round((julianday({now}) - julianday({time})) * 86400.0, 3)",
	Duration:   func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + " seconds" },
	// A replay's read of its record goes straight to the connection,
	// numbered ($n, which SQLite takes), with no gorm statement built.
	Numbered: true,
}
