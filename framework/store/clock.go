package store

import (
	"fmt"
	"sync/atomic"
	"time"
)

// DatabaseTime receives the value of [Driver.Now] from a row: a timestamp
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
// reading its row. It is fed the database time each such
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
	// 0, or the database clock's resolution ([Driver.ClockResolution]).
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
// coarser resolution ([Driver.ClockResolution]), in UTC; false when no reading is
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
