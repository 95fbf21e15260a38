package recordsql

import (
	"testing"
	"time"
)

// TestJudgeAtComparesAsTheListStatement: a record read by Get is judged on
// the database clock read with it as the CASEs of "list" judge it in SQL
// (expires_at <= now, locked_until <= now): at the very instant it has
// expired, and a microsecond before it has not.
func TestJudgeAtComparesAsTheListStatement(t *testing.T) {
	now := time.Date(2026, 12, 4, 0, 30, 0, 123456000, time.UTC)
	at := func(d time.Duration) *time.Time { v := now.Add(d); return &v }
	for _, c := range []struct {
		name        string
		state       string
		expires     time.Time
		lockedUntil *time.Time
		expired     int
		leaseEnded  int
	}{
		{"completed, expires now", "completed", now, nil, 1, 0},
		{"completed, expires a µs later", "completed", now.Add(time.Microsecond), nil, 0, 0},
		{"completed, expired long ago", "completed", now.Add(-time.Hour), nil, 1, 0},
		{"in progress past its expiry", "in_progress", now.Add(-time.Hour), at(time.Minute), 0, 0},
		{"lease ends now", "in_progress", now.Add(time.Hour), at(0), 0, 1},
		{"lease ends a µs later", "in_progress", now.Add(time.Hour), at(time.Microsecond), 0, 0},
		{"unknown, no lease", "unknown", now.Add(time.Hour), nil, 0, 0},
	} {
		r := recordRow{State: c.state, ExpiresAt: c.expires, LockedUntil: c.lockedUntil, Expired: 7, LeaseExpired: 7}
		r.judgeAt(now)
		if r.Expired != c.expired || r.LeaseExpired != c.leaseEnded {
			t.Errorf("%s: expired %d, lease ended %d; want %d, %d", c.name, r.Expired, r.LeaseExpired, c.expired, c.leaseEnded)
		}
	}
}
