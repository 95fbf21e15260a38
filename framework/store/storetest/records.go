package storetest

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/fallback/postkeys/recordstoretest"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/recordsql"
	"github.com/retrysafe/retrysafe/migrations"
)

// ShiftRecordClock makes the idempotency records of db read the database
// clock moved ahead by offset(), read at every statement, as if the
// database's clock ran that far ahead: a test moves it (with its engine's
// clock) to end leases, replay windows and TTLs instead of sleeping. It
// replaces db.Driver by a test driver: the same driver, whose records are
// its statements with the clock spelled moved ([store.Driver.Records]
// reads the database clock as it is); nothing else changes. Call it
// before anything is built on db.
func ShiftRecordClock(tb testing.TB, db *store.DB, offset func() time.Duration) {
	tb.Helper()
	d, ok := db.Driver.(recordsql.Respellable)
	if !ok {
		tb.Fatalf("storetest: the driver %q cannot move the clock of its records", db.Driver.Name())
	}
	db.Driver = d.WithRecordSpelling(func(s recordsql.Spelling) recordsql.Spelling {
		clock, duration := s.Clock, s.Duration
		s.Clock = func(shifts ...string) string { return clock(append([]string{"off"}, shifts...)...) }
		s.Bind = func(args map[string]any) { args["off"] = duration(offset()) }
		return s
	})
}

// offsetClock is how far a test moved the database clock.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

func (c *offsetClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

// testRecords runs the idempotency records' contract (recordstoretest) on
// the driver's statements ([store.Driver.Records], through
// postkeys.NewRecordStore, the clock moved by [ShiftRecordClock]) and its
// migrations, through store.Open and on the application's own handle
// (store.New): claims, takeovers, fencing, leases and expiry on the
// database clock.
func testRecords(t *testing.T, h Harness) {
	on := func(t *testing.T, db *store.DB) recordstoretest.Harness {
		t.Helper()
		if err := migrations.Up(context.Background(), db.SQL(), db.Driver.Name()); err != nil {
			t.Fatal(err)
		}
		clock := &offsetClock{}
		ShiftRecordClock(t, db, clock.offset)
		records, err := postkeys.NewRecordStore(db, postkeys.RecordStoreConfig{})
		if err != nil {
			t.Fatal(err)
		}
		return recordstoretest.Harness{DB: db, Store: records, Advance: clock.advance}
	}
	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		recordstoretest.Run(t, func(t *testing.T) recordstoretest.Harness {
			return on(t, open(t, h, store.Config{LockTimeout: 200 * time.Millisecond}))
		})
	})
	t.Run("OwnGormDB", func(t *testing.T) {
		t.Parallel()
		recordstoretest.Run(t, func(t *testing.T) recordstoretest.Harness {
			db, err := store.New(context.Background(), h.Gorm(t), store.Config{LockTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return on(t, db)
		})
	})
}
