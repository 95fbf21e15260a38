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
	// (store.Driver.ClockResolution: SQLite's reads in milliseconds), so that a
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

// stampedRow is a resource table whose time columns the application's
// AutoMigrate makes, of its handle's default precision (DATETIME(3) on the
// MySQL family, timestamptz on PostgreSQL); milliRow's created_at has
// three digits.
type (
	stampedRow struct {
		ID        int64     `gorm:"primaryKey;autoIncrement:false"`
		CreatedAt time.Time `gorm:"not null;autoCreateTime:false"`
		UpdatedAt time.Time `gorm:"not null;autoUpdateTime:false"`
	}
	milliRow struct {
		ID        int64     `gorm:"primaryKey;autoIncrement:false"`
		CreatedAt time.Time `gorm:"not null;autoCreateTime:false;precision:3"`
		UpdatedAt time.Time `gorm:"not null;autoUpdateTime:false"`
	}
)

// testTimeColumns: a time cut to the step that the driver reports for an
// application's AutoMigrate'd columns ([store.Rows.TimeStep]; 0: the time
// whole) is stored exactly, and read back as written; the step of a table
// is its coarsest column's; a table that does not exist has none.
func testTimeColumns(t *testing.T, h Harness) {
	ctx := context.Background()
	gdb := h.Gorm(t)
	db, err := store.New(ctx, gdb, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	step := func(table string) time.Duration {
		t.Helper()
		d, err := db.Rows().TimeStep(ctx, gdb, table)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	if d := step("stamped_rows"); d != 0 {
		t.Fatalf("the step of a table that does not exist = %v", d)
	}
	if err := gdb.AutoMigrate(&stampedRow{}, &milliRow{}); err != nil {
		t.Fatal(err)
	}
	def, milli := step("stamped_rows"), step("milli_rows")
	if (def == 0) != (milli == 0) || def != 0 && milli != max(def, time.Millisecond) {
		t.Fatalf("steps: default %v, with a column of three digits %v; want both 0, or the coarsest column's", def, milli)
	}
	// A time with every digit, cut as the engine cuts its stamps.
	at := time.Date(2026, 3, 4, 5, 6, 7, 123456789, time.UTC)
	d, m := at.Truncate(max(def, time.Nanosecond)), at.Truncate(max(milli, time.Nanosecond))
	if err := gdb.Create(&stampedRow{ID: 1, CreatedAt: d, UpdatedAt: d}).Error; err != nil {
		t.Fatal(err)
	}
	if err := gdb.Create(&milliRow{ID: 1, CreatedAt: m, UpdatedAt: m}).Error; err != nil {
		t.Fatal(err)
	}
	var got stampedRow
	var gotMilli milliRow
	if err := gdb.Take(&got, 1).Error; err != nil {
		t.Fatal(err)
	}
	if err := gdb.Take(&gotMilli, 1).Error; err != nil {
		t.Fatal(err)
	}
	for _, r := range []struct {
		got  stampedRow
		want time.Time
	}{{got, d}, {stampedRow(gotMilli), m}} {
		if !r.got.CreatedAt.Equal(r.want) || !r.got.UpdatedAt.Equal(r.want) {
			t.Fatalf("stored %v, read back %v and %v", r.want, r.got.CreatedAt, r.got.UpdatedAt)
		}
	}
}
