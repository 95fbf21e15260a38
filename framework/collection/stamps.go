package collection

import (
	"context"
	"sync/atomic"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// stampColumns are the time columns a write stamps with the database
// clock.
var stampColumns = []string{"created_at", "updated_at"}

// stamps is the step in which a collection's table keeps the times it
// stamps ([store.TimeColumns]): a write answers with the times it wrote,
// so they must be the times the columns store, to the digit, or the
// ETag and the body of a create (its creation time in microseconds) would
// differ from every later read's, and an If-Match with the create's ETag
// would never match. The step is read from the database by the first
// write, once per collection.
type stamps struct {
	// step is the step plus one nanosecond; 0 until read.
	step atomic.Int64
}

// stamp returns now as the table's time columns of c keep it: cut to
// their step, which it reads on db the first time (while the table does
// not exist, it reads it again on the next write).
func (c *Collection[Cmd, Model]) stamp(ctx context.Context, db *gorm.DB, now time.Time) (time.Time, error) {
	step := c.stamps.step.Load()
	if step == 0 {
		var d time.Duration
		if cols, ok := c.engine.DB().Driver.(store.TimeColumns); ok {
			var err error
			if d, err = cols.TimeStep(ctx, db, c.res.Table, stampColumns); err != nil {
				return now, c.engine.DB().Classify(err)
			}
			if d == 0 {
				return now, nil
			}
		}
		step = int64(d) + 1
		c.stamps.step.Store(step)
	}
	if step > 1 {
		now = now.Truncate(time.Duration(step - 1))
	}
	return now, nil
}
