package store_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

// TestClockKeepsTheTightestFreshReading: an estimate is the last reading
// plus the time elapsed since it arrived; a reading that would put the
// clock later replaces a fresh one, one that would put it earlier does
// not; a reading older than ClockMaxAge gives no estimate.
func TestClockKeepsTheTightestFreshReading(t *testing.T) {
	var c store.Clock
	db := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	at := time.Now()
	c.Observe(db, at)
	est, ok := c.Now()
	if !ok || est.Before(db) || est.After(db.Add(time.Since(at)).Add(time.Microsecond)) {
		t.Fatalf("estimate %v (%v) from the reading %v", est, ok, db)
	}
	if est.Location() != time.UTC || est.Nanosecond()%1000 != 0 {
		t.Fatalf("estimate %v is not UTC in microseconds", est)
	}

	// An answer that took longer carries an earlier time for the same
	// instant: it is a looser bound, and the kept reading stays.
	c.Observe(db.Add(-time.Millisecond), at)
	if got, _ := c.Now(); got.Before(est) {
		t.Fatalf("a looser reading moved the estimate back from %v to %v", est, got)
	}
	// One that puts the clock later is the tighter bound.
	c.Observe(db.Add(time.Hour), at)
	if got, _ := c.Now(); got.Before(db.Add(time.Hour)) {
		t.Fatalf("a tighter reading left the estimate at %v", got)
	}

	// A reading past the refresh age gives way to a newer one, even a
	// looser one: a clock that drifts is bounded by the newest answer.
	var r store.Clock
	r.Observe(db.Add(time.Hour), at.Add(-500*time.Millisecond))
	r.Observe(db, at)
	if got, _ := r.Now(); got.After(db.Add(time.Minute)) {
		t.Fatalf("a reading 500 ms old was kept over a new one: %v", got)
	}

	var stale store.Clock
	stale.Observe(db, time.Now().Add(-store.ClockMaxAge-time.Millisecond))
	if got, ok := stale.Now(); ok {
		t.Fatalf("a reading older than ClockMaxAge gave the estimate %v", got)
	}
	stale.Observe(time.Time{}, time.Now())
	if _, ok := stale.Now(); ok {
		t.Fatal("a zero reading gave an estimate")
	}
}

// TestConfigClockMaxAge: a store's clock keeps a reading for
// Config.ClockMaxAge (1 s by default), and none at all when it is
// negative, so that every create reads first.
func TestConfigClockMaxAge(t *testing.T) {
	db := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	twoSecondsAgo := time.Now().Add(-2 * time.Second)
	for _, c := range []struct {
		maxAge time.Duration
		want   bool
	}{{0, false}, {time.Hour, true}, {-1, false}} {
		s, err := store.Open(context.Background(), "sqlite:"+filepath.Join(t.TempDir(), "clock.db"), store.Config{ClockMaxAge: c.maxAge})
		if err != nil {
			t.Fatal(err)
		}
		s.Clock().Observe(db, twoSecondsAgo)
		if _, ok := s.Clock().Now(); ok != c.want {
			t.Errorf("ClockMaxAge %v: an estimate from a reading 2 s old: %v, want %v", c.maxAge, ok, c.want)
		}
		if c.maxAge < 0 {
			s.Clock().Observe(db, time.Now())
			if _, ok := s.Clock().Now(); ok {
				t.Errorf("ClockMaxAge %v: an estimate from a fresh reading", c.maxAge)
			}
		}
		_ = s.Close()
	}
}

// TestClockTruncatesToTheDatabaseResolution: on SQLite, whose clock reads
// in milliseconds (store.Driver.ClockResolution), an estimate is whole
// milliseconds, and none of 500 is ahead of SQLite's clock read after it;
// kept in microseconds, 114 of 500 were (tried).
func TestClockTruncatesToTheDatabaseResolution(t *testing.T) {
	ctx := context.Background()
	// The one reading serves all 500 estimates, however slowly a loaded
	// machine reads SQLite's clock 500 times.
	s, err := store.Open(ctx, "sqlite:"+filepath.Join(t.TempDir(), "clock.db"), store.Config{ClockMaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if s.Driver.ClockResolution() != time.Millisecond {
		t.Fatalf("the SQLite driver does not say its clock reads in milliseconds")
	}
	read := func() time.Time {
		t.Helper()
		var now store.DatabaseTime
		if err := s.SQL().QueryRowContext(ctx, "SELECT "+s.Driver.Now()).Scan(&now); err != nil {
			t.Fatal(err)
		}
		return now.Time
	}
	s.Clock().Observe(read(), time.Now())
	for i := range 500 {
		est, ok := s.Clock().Now()
		if !ok {
			t.Fatalf("no estimate %d", i)
		}
		if est.Nanosecond()%int(time.Millisecond) != 0 {
			t.Fatalf("estimate %d, %v, is not in whole milliseconds", i, est)
		}
		if now := read(); est.After(now) {
			t.Fatalf("estimate %d, %v, is ahead of SQLite's clock %v read after it", i, est, now)
		}
	}
}

// BenchmarkClockNow is the estimate a create takes instead of a read.
func BenchmarkClockNow(b *testing.B) {
	var c store.Clock
	c.Observe(time.Now().UTC(), time.Now())
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := c.Now(); !ok {
			c.Observe(time.Now().UTC(), time.Now())
		}
	}
}

// BenchmarkClockObserve is what each read-first adds to feed the clock.
func BenchmarkClockObserve(b *testing.B) {
	var c store.Clock
	db := time.Now().UTC()
	b.ReportAllocs()
	for b.Loop() {
		c.Observe(db, time.Now())
	}
}
