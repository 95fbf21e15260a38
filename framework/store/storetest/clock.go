package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

// testClock: the driver's Now reads into a DatabaseTime in UTC, agrees
// with this process's clock (both run on one machine in the suite) and
// does not go backwards between statements, whatever the session's time
// zone setting.
func testClock(t *testing.T, h Harness) {
	db := open(t, h, store.Config{})
	read := func() time.Time {
		t.Helper()
		now := readNow(t, db)
		if now.Location() != time.UTC {
			t.Fatalf("the database time %v is not in UTC", now)
		}
		return now
	}
	first := read()
	if d := time.Since(first); d > time.Minute || d < -time.Minute {
		t.Fatalf("the database clock %v is %v away from this process's clock", first, d)
	}
	if second := read(); second.Before(first) {
		t.Fatalf("the database clock went back from %v to %v", first, second)
	}
}

// testClockEstimate: a [store.Clock] fed with the database time a read
// returned estimates the database clock without reading it, never ahead
// of it: each estimate taken before a read is no later than the time that
// read returns, and no earlier than the reading it was made from.
func testClockEstimate(t *testing.T, h Harness) {
	db := open(t, h, store.Config{})
	read := func() time.Time { t.Helper(); return readNow(t, db) }
	// No slack: an estimate is truncated to the clock's resolution
	// (store.ClockResolution: SQLite's reads in milliseconds), so that a
	// reading taken after it never shows less.
	clock := db.Clock()
	if _, ok := clock.Now(); ok {
		t.Fatal("a clock that never read the database has an estimate")
	}
	fed := read()
	clock.Observe(fed, time.Now())
	for i := range 200 {
		est, ok := clock.Now()
		if !ok {
			t.Fatalf("no estimate %d after a reading", i)
		}
		if est.Before(fed.Truncate(time.Microsecond)) {
			t.Fatalf("estimate %d, %v, is before the reading %v it was made from", i, est, fed)
		}
		now := read()
		if est.After(now) {
			t.Fatalf("estimate %d, %v, is ahead of the database clock %v read after it", i, est, now)
		}
		if i%2 == 0 { // every other read feeds the clock
			clock.Observe(now, time.Now())
			fed = now
		}
	}
}

// readNow reads the database clock of db.
func readNow(t *testing.T, db *store.DB) time.Time {
	t.Helper()
	var now store.DatabaseTime
	if err := db.SQL().QueryRowContext(context.Background(), "SELECT "+db.Driver.Now()).Scan(&now); err != nil {
		t.Fatal(err)
	}
	return now.Time
}
