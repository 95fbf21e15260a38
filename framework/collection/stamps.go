package collection

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// stamp returns now as the table's time columns keep it, cut to their
// step (store.Rows.TimeStep): a write answers with the times it wrote,
// so they must be the times the columns store, to the digit, or the ETag
// and the body of a create (its creation time in microseconds) would
// differ from every later read's, and an If-Match with the create's ETag
// would never match.
func (c *Collection[Cmd, Model]) stamp(ctx context.Context, db *gorm.DB, now time.Time) (time.Time, error) {
	step, err := c.rows.TimeStep(ctx, db, c.res.Table)
	if err != nil || step <= 0 {
		return now, err
	}
	return now.Truncate(step), nil
}
