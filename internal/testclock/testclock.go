package testclock

import (
	"sync"
	"time"
)

// Clock is safe for concurrent use; pass its Now method as a Now func.
type Clock struct {
	mu    sync.Mutex
	now   time.Time
	start time.Time
}

// New returns a clock that stands at start.
func New(start time.Time) *Clock { return &Clock{now: start, start: start} }

// Offset returns how far the clock was advanced since New. Pass it where
// a shift of the database clock is wanted (storetest.ShiftRecordClock),
// so that one Advance moves both clocks.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now.Sub(c.start)
}

// Now returns the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock forward by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}
