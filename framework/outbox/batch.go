package outbox

import (
	"context"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// claimedEvent is an event with its row position.
type claimedEvent struct {
	position int64
	attempts int
	event    Event
}

// withBatch claims up to limit pending events due at now through the
// driver's [store.Outbox], hands them to publish (every aggregate's events
// in seq order, starting at its earliest pending event) and settles what
// publish returns. It returns the number of events claimed.
//
// Where the driver's claim locks ([store.Outbox.ClaimLocks]), the claim,
// the publish and the settle run in one write transaction, whose row
// locks keep other relays off the batch until it is settled. Elsewhere
// (SQLite) the claim is a plain read and the settle a short write
// transaction after the publish, so that no write transaction is held
// while the broker answers; one relay runs per database.
func (r *Relay) withBatch(ctx context.Context, now time.Time, limit int, publish func([]claimedEvent) store.OutboxSettleParams) (int, error) {
	claim := store.OutboxClaimParams{Now: now, Limit: limit}
	settle := func(tx *gorm.DB, p store.OutboxSettleParams) error {
		p.Now, p.KeepPublished = now, r.cfg.Retention > 0
		return r.ob.Settle(ctx, tx, p)
	}
	if r.ob.ClaimLocks() {
		var n int
		err := r.db.Write(ctx, func(tx *gorm.DB) error {
			batch, err := r.claim(ctx, tx, claim)
			if err != nil || len(batch) == 0 {
				return err
			}
			n = len(batch)
			return settle(tx, publish(batch))
		})
		return n, err
	}
	batch, err := r.claim(ctx, r.db.Gorm, claim)
	if err != nil || len(batch) == 0 {
		return 0, r.db.Classify(err)
	}
	done := publish(batch)
	return len(batch), r.db.Write(ctx, func(tx *gorm.DB) error { return settle(tx, done) })
}

// claim claims a batch on q and reads its events.
func (r *Relay) claim(ctx context.Context, q *gorm.DB, p store.OutboxClaimParams) ([]claimedEvent, error) {
	rows, err := r.ob.Claim(ctx, q, p)
	if err != nil {
		return nil, err
	}
	batch := make([]claimedEvent, 0, len(rows))
	for i := range rows {
		ev, err := eventOf(&rows[i])
		if err != nil {
			return nil, err
		}
		batch = append(batch, claimedEvent{position: rows[i].Position, attempts: rows[i].Attempts, event: ev})
	}
	return batch, nil
}
