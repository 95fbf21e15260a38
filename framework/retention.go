package framework

import (
	"errors"
	"time"
)

// Retention is the one TTL policy of both patterns.
type Retention struct {
	// ReplayWindow is how long a stored outcome is replayed: a converged PUT
	// answers 201 + Idempotent-Replayed within it (200 after), and a POST
	// idempotency record expires after it. Defaults to 24h.
	ReplayWindow time.Duration
	// TombstoneRetention is how long a deleted resource's ID answers 410
	// resource_deleted before the ID may be used again. Defaults to 30 days.
	TombstoneRetention time.Duration
}

// DefaultRetention returns the default policy.
func DefaultRetention() Retention {
	return Retention{ReplayWindow: 24 * time.Hour, TombstoneRetention: 30 * 24 * time.Hour}
}

// WithDefaults fills zero fields with the defaults and rejects negative ones.
func (r Retention) WithDefaults() (Retention, error) {
	if r.ReplayWindow < 0 || r.TombstoneRetention < 0 {
		return r, errors.New("framework: retention durations must not be negative")
	}
	d := DefaultRetention()
	if r.ReplayWindow == 0 {
		r.ReplayWindow = d.ReplayWindow
	}
	if r.TombstoneRetention == 0 {
		r.TombstoneRetention = d.TombstoneRetention
	}
	return r, nil
}

// InReplayWindow reports whether an outcome stored at t is still replayed at now.
func (r Retention) InReplayWindow(t, now time.Time) bool {
	return now.Before(t.Add(r.ReplayWindow))
}

// ReplayExpiry is when an outcome stored at t stops being replayed.
func (r Retention) ReplayExpiry(t time.Time) time.Time { return t.Add(r.ReplayWindow) }

// TombstoneLive reports whether a resource deleted at t still answers 410.
func (r Retention) TombstoneLive(t, now time.Time) bool {
	return now.Before(t.Add(r.TombstoneRetention))
}
