package collection

import (
	"context"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/google/uuid"
	"gorm.io/gorm"
)

// DeleteRequest asks to delete one resource.
type DeleteRequest struct {
	Tenant string
	ID     uuid.UUID
	// IfMatch, when set, is the If-Match field: the delete applies only
	// while the resource's ETag matches (else 412 precondition_failed).
	IfMatch string
}

// Delete tombstones the resource: GET answers 404 from now on and a PUT to
// its ID 410 for the tombstone retention, counted from the database clock
// of the delete. Without If-Match it is one statement; with it, a locked
// read and a fenced write in one transaction.
func (c *Collection[Cmd, Model]) Delete(ctx context.Context, req DeleteRequest) error {
	if req.IfMatch == "" {
		return c.engine.DB().Classify(c.DeleteTx(ctx, c.engine.DB().Gorm, req))
	}
	return c.engine.DB().Write(ctx, func(tx *gorm.DB) error { return c.DeleteTx(ctx, tx, req) })
}

// DeleteTx is [Collection.Delete] inside the caller's transaction tx.
func (c *Collection[Cmd, Model]) DeleteTx(ctx context.Context, tx *gorm.DB, req DeleteRequest) error {
	p := store.RowTombstoneParams{Key: c.key(req.Tenant, req.ID)}
	if req.IfMatch != "" {
		cur := new(Model)
		found, err := c.read(ctx, tx, store.RowReadParams{Key: p.Key, Dest: cur, ForUpdate: true, LiveOnly: true})
		if err != nil {
			return err
		}
		if !found {
			return framework.Errorf(wire.CodeNotFound, "no such %s", c.res.Singular)
		}
		sys := any(cur).(Row).SystemColumns()
		if !etagMatches(req.IfMatch, sys.ETag()) {
			return framework.Errorf(wire.CodePreconditionFailed, "If-Match does not match the current ETag %s", sys.ETag())
		}
		p.Version = sys.Version
	}
	ok, err := c.rows.Tombstone(ctx, tx, p)
	if err != nil {
		return err
	}
	if !ok {
		return framework.Errorf(wire.CodeNotFound, "no such %s", c.res.Singular)
	}
	c.engine.Logger().LogAttrs(ctx, slog.LevelInfo, "resource deleted",
		slog.String("tenant", req.Tenant), slog.String("resource", c.res.Name), slog.String("id", req.ID.String()))
	return nil
}

// SetStatus moves a live resource to status (for example an order from
// draft to submitted), bumping its version and stamping updated_at with
// the database clock, and returns its representation. The replace guard
// sees the new status from then on.
func (c *Collection[Cmd, Model]) SetStatus(ctx context.Context, tenant string, id uuid.UUID, status string) (Result, error) {
	var out Result
	err := c.engine.DB().Write(ctx, func(tx *gorm.DB) error {
		var err error
		out, err = c.SetStatusTx(ctx, tx, tenant, id, status)
		return err
	})
	return out, err
}

// SetStatusTx is [Collection.SetStatus] inside the caller's transaction tx.
func (c *Collection[Cmd, Model]) SetStatusTx(ctx context.Context, tx *gorm.DB, tenant string, id uuid.UUID, status string) (Result, error) {
	key := c.key(tenant, id)
	m := new(Model)
	var now time.Time
	found, err := c.read(ctx, tx, store.RowReadParams{Key: key, Dest: m, ForUpdate: true, LiveOnly: true, Preload: c.preload, Now: &now})
	if err != nil {
		return Result{}, err
	}
	if !found {
		return Result{}, framework.Errorf(wire.CodeNotFound, "no such %s", c.res.Singular)
	}
	sys := any(m).(Row).SystemColumns()
	sys.normalize()
	if sys.Status != status {
		if now, err = c.stamp(ctx, tx, now); err != nil {
			return Result{}, err
		}
		version := sys.Version
		sys.Status, sys.Version, sys.UpdatedAt = status, version+1, now
		ok, err := c.rows.Update(ctx, tx, store.RowUpdateParams{Key: key, Version: version, Row: m, Columns: []string{"status", "version", "updated_at"}})
		if err != nil {
			return Result{}, err
		}
		if !ok {
			return Result{}, framework.Errorf(wire.CodeRequestInProgress, "the resource changed concurrently")
		}
		res, err := c.current(m)
		if err != nil || c.res.OnStatusFunc == nil {
			return res, err
		}
		return res, c.res.OnStatusFunc(ctx, tx, Change[Model]{Model: m, Representation: res.Body})
	}
	return c.current(m)
}
