package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
)

// DatabaseTime receives the value of [Dialect.Now] from a row: a timestamp
// (PostgreSQL) or SQLite's UTC text. Time is in UTC.
type DatabaseTime struct{ Time time.Time }

// sqliteTime is the layout of SQLite's strftime('%Y-%m-%d %H:%M:%f').
const sqliteTime = "2006-01-02 15:04:05.999999999"

// Scan implements sql.Scanner.
func (t *DatabaseTime) Scan(src any) error {
	switch v := src.(type) {
	case time.Time:
		t.Time = v.UTC()
		return nil
	case string:
		return t.parse(v)
	case []byte:
		return t.parse(string(v))
	}
	return fmt.Errorf("store: a database time cannot be read from %T", src)
}

func (t *DatabaseTime) parse(s string) error {
	v, err := time.ParseInLocation(sqliteTime, s, time.UTC)
	if err != nil {
		return fmt.Errorf("store: database time %q: %w", s, err)
	}
	t.Time = v
	return nil
}

// ClockMaxAge is how long after its last read of the database clock a
// [Clock] still estimates it, unless [Config.ClockMaxAge] says otherwise.
const ClockMaxAge = time.Second

// clockRefresh is how long a [Clock] keeps a reading that later ones do
// not tighten: a fresh one replaces it after that.
const clockRefresh = 100 * time.Millisecond

// Clock estimates the database clock between reads of it, for a write
// that would otherwise read it first: a PUT create that inserts without
// reading its row ([InsertsFirst]). It is fed the database time each such
// read returned ([Clock.Observe]) and estimates from the reading taken
// last, or the tightest of the last clockRefresh, plus the time elapsed
// since on this process's monotonic clock, never its wall clock: an
// estimate is the database's clock, as a read-first gives it, whatever
// this process's clock says. The database evaluated its time before the
// answer arrived, so an estimate is never ahead of the database clock,
// and behind it by at most the time that answer took to arrive, as a
// read-first's time is behind the commit it stamps. Past its maximum age
// ([Config.ClockMaxAge], [ClockMaxAge] for the zero Clock) without a
// reading there is no estimate, and the write reads first. The zero Clock
// has no reading; a Clock is safe for concurrent use.
type Clock struct {
	last atomic.Pointer[clockReading]
	// maxAge is the maximum age of a reading: ClockMaxAge when 0, no
	// estimate at all when negative.
	maxAge time.Duration
	// resolution is what an estimate is truncated to: a microsecond when
	// 0, or the database clock's resolution ([ClockResolution]).
	resolution time.Duration
}

// clockReading is the database time db that an answer received at the
// local instant at (which holds a monotonic reading) carried.
type clockReading struct{ db, at time.Time }

// Observe records db, the database time an answer received at the local
// instant received carried (time.Now() when the read returned).
func (c *Clock) Observe(db, received time.Time) {
	if db.IsZero() {
		return
	}
	if r := c.last.Load(); r != nil {
		age := received.Sub(r.at)
		// r estimates r.db+age at received: keep it while it is fresh and
		// no lower than db, the tighter bound.
		if age >= 0 && age < clockRefresh && !db.After(r.db.Add(age)) {
			return
		}
	}
	c.last.Store(&clockReading{db: db, at: received})
}

// Now returns the estimated database clock, truncated to microseconds
// (what every driver's timestamp columns keep) or to the database clock's
// coarser resolution ([ClockResolution]), in UTC; false when no reading is
// younger than the clock's maximum age.
func (c *Clock) Now() (time.Time, bool) {
	r := c.last.Load()
	if r == nil || c.maxAge < 0 {
		return time.Time{}, false
	}
	maxAge := c.maxAge
	if maxAge == 0 {
		maxAge = ClockMaxAge
	}
	age := time.Since(r.at)
	if age < 0 || age > maxAge {
		return time.Time{}, false
	}
	resolution := c.resolution
	if resolution <= 0 {
		resolution = time.Microsecond
	}
	return r.db.Add(age).UTC().Truncate(resolution), true
}

// ClockResolution is implemented by a [Driver] whose clock ([Driver.Now])
// reads coarser than a microsecond: SQLite's, in milliseconds. The
// [Clock] truncates its estimates to it, so that an estimate is never
// ahead of a reading of the database clock taken after it, and a row a
// create stamped with an estimate never looks younger than one a later
// write stamped with a reading.
type ClockResolution interface {
	// ClockResolution is the resolution of the database clock as
	// [Driver.Now] reads it.
	ClockResolution() time.Duration
}

// TimeColumns is implemented by a [Driver] whose time columns may keep
// fewer fractional digits of a second than its clock reads: the MySQL
// family's DATETIME(n) (gorm's AutoMigrate makes DATETIME(3) unless its
// dialector is told otherwise) and PostgreSQL's timestamp(n), against
// clocks read in microseconds. Such a column stores a time cut to its
// digits (MariaDB truncates, MySQL and PostgreSQL round), so that a write
// that answered from the time it stamped would answer another time, and
// another ETag, than every later read. The PUT engine stamps a resource
// table's rows with times cut to [TimeColumns.TimeStep] itself, which the
// column then stores exactly. SQLite keeps a time as the text it is
// given, whole.
type TimeColumns interface {
	// TimeStep returns the coarsest step in which the columns of table
	// keep a time: [TimeStepOf] their number of fractional digits, or 0
	// when the table has none of them.
	TimeStep(ctx context.Context, db *gorm.DB, table string, columns []string) (time.Duration, error)
}

// TimeStepOf is the step of a time with digits fractional digits of a
// second: time.Second for 0, time.Millisecond for 3, time.Microsecond
// for 6, time.Nanosecond from 9 on.
func TimeStepOf(digits int) time.Duration {
	step := time.Second
	for range min(max(digits, 0), 9) {
		step /= 10
	}
	return step
}

// InsertsFirst is implemented by a [Driver] whose database a create
// should insert into without reading first, and where a failed INSERT
// fails its own transaction alone: every driver of the framework. On a
// database a round trip away (PostgreSQL, the MySQL family) the read
// costs a round trip of its own; on SQLite it costs no round trip but
// compiling and stepping two statements, after another connection's
// commit emptied the connection's page cache. A PUT create there inserts
// on the estimated database clock ([DB.Clock]) and reads only on a
// conflict.
type InsertsFirst interface {
	// InsertsFirst reports that creates should insert first.
	InsertsFirst() bool
}
