package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Outbox is the statements of the transactional outbox (package
// framework/outbox) on one database family: one method per statement, each
// with its parameters in a struct, as river's riverdriver has them. The
// outbox's relay keeps the algorithm (batches, order per aggregate,
// backoff, parking, metrics) and calls these; a driver spells them for its
// database. The tables are the framework's (migrations 00002 and 00003):
// outbox_events holds the pending and parked events, outbox_sequences an
// aggregate's last sequence number, outbox_published the published events
// a relay keeps.
//
// Every method runs on q, the application's handle or a transaction of
// [DB.Write] (or one of the application's own) as the method says, and
// returns the database's errors unclassified: the caller passes them
// through [DB.Classify]. Like [Driver], the interface serves the
// framework's own packages and may gain methods in any release.
type Outbox interface {
	// ClaimLocks reports how the driver's claim keeps two relays off one
	// event. When true (PostgreSQL, the MySQL family), Claim locks the
	// rows it returns (FOR UPDATE SKIP LOCKED) and must run in a write
	// transaction that the relay holds while it publishes the batch and
	// then settles it in that same transaction: the row locks keep other
	// relays off the batch, so several relays may run at once, and a
	// relay that dies mid-batch loses its connection, which rolls its
	// claim back and releases the rows for another relay. Only outbox
	// rows are locked, so writers are never held up by a slow broker.
	//
	// When false (SQLite), Claim is a plain read on the handle and the
	// relay settles in a short write transaction after the publish:
	// SQLite has one writer at a time, so holding a write transaction
	// across a publish would stall every request. Such a database
	// supports one relay.
	ClaimLocks() bool
	// Claim returns up to p.Limit pending events due at p.Now, in position
	// order: an event never tried is always due, whatever the writer's
	// clock said, and a refused one is due at its AvailableAt. Every
	// aggregate's events come in seq order, starting at its earliest
	// pending event: an event behind an earlier one of its aggregate that
	// waits out a backoff, or that another relay holds, is not claimed, so
	// a later event is never published before an earlier one and events
	// stuck behind a backoff never fill a batch and starve other
	// aggregates. Parked events are never claimed.
	Claim(ctx context.Context, q *gorm.DB, p OutboxClaimParams) ([]OutboxEventRow, error)
	// Settle records on tx, a write transaction, what the relay did with
	// claimed events: published ones leave outbox_events (moved to
	// outbox_published when p.KeepPublished), refused ones count an
	// attempt and are due again at their RetryAt, or are parked.
	Settle(ctx context.Context, tx *gorm.DB, p OutboxSettleParams) error
	// Write adds p.Events to outbox_events, in order, on tx, the caller's
	// transaction, and returns each event's sequence number within its
	// aggregate (nil when p.Later let the driver queue them). See
	// [OutboxWriteParams] for how the numbers are drawn.
	Write(ctx context.Context, tx *gorm.DB, p OutboxWriteParams) ([]int64, error)
	// DeletePublished deletes up to p.Limit events of outbox_published
	// published before p.Before, oldest first, in one statement, and
	// returns how many it deleted.
	DeletePublished(ctx context.Context, q *gorm.DB, p OutboxDeletePublishedParams) (int64, error)
	// Requeue makes the parked event p.ID pending again, due at p.Now,
	// with no attempts and no error; it returns false when p.ID names no
	// parked event.
	Requeue(ctx context.Context, q *gorm.DB, p OutboxRequeueParams) (bool, error)
	// ListParked returns up to p.Limit parked events, oldest parked first.
	ListParked(ctx context.Context, q *gorm.DB, p OutboxListParkedParams) ([]OutboxEventRow, error)
	// Stats reads the backlog of outbox_events.
	Stats(ctx context.Context, q *gorm.DB) (OutboxStats, error)
	// Vacuum removes the dead rows that published events leave in
	// outbox_events, where the database does not reuse their space at once
	// (PostgreSQL: VACUUM (SKIP_LOCKED), skipped when another vacuum holds
	// the table), or does nothing. It returns [ErrVacuumRefused] when the
	// database user may not vacuum the table.
	Vacuum(ctx context.Context, q *gorm.DB) error
}

// OutboxEventRow is a row of outbox_events. Its tags name the columns, so
// that a driver scans rows into it with gorm whatever the application's
// naming strategy.
type OutboxEventRow struct {
	// Position orders events in the outbox, increasing in insert order.
	Position int64 `gorm:"column:position;primaryKey;autoIncrement"`
	// ID is the event's UUID, in its text form.
	ID            string `gorm:"column:id"`
	TenantID      string `gorm:"column:tenant_id"`
	Type          string `gorm:"column:type"`
	AggregateType string `gorm:"column:aggregate_type"`
	AggregateID   string `gorm:"column:aggregate_id"`
	// Seq is the event's number within its aggregate.
	Seq int64 `gorm:"column:seq"`
	// Payload is the event's JSON body, Headers the JSON object of its
	// propagation headers.
	Payload   string    `gorm:"column:payload"`
	Headers   string    `gorm:"column:headers"`
	CreatedAt time.Time `gorm:"column:created_at"`
	// Attempts counts the publisher's refusals; AvailableAt is when a
	// refused event is due again.
	Attempts    int       `gorm:"column:attempts"`
	AvailableAt time.Time `gorm:"column:available_at"`
	// LastError is the last refusal, nil when there was none.
	LastError *string `gorm:"column:last_error"`
	// ParkedAt is set on a parked event.
	ParkedAt *time.Time `gorm:"column:parked_at"`
}

// OutboxClaimParams are the parameters of [Outbox.Claim].
type OutboxClaimParams struct {
	// Now is the relay's clock: refused events due by then are claimed.
	Now time.Time
	// Limit bounds the events claimed.
	Limit int
}

// OutboxSettleParams are the parameters of [Outbox.Settle].
type OutboxSettleParams struct {
	// Now is when the events were settled: their publication and parking
	// time.
	Now time.Time
	// Published are the positions of the events the publisher accepted.
	Published []int64
	// Refused are the events the publisher refused.
	Refused []OutboxRefusal
	// KeepPublished moves published events to outbox_published instead
	// of only deleting them.
	KeepPublished bool
}

// OutboxRefusal is one refused event of [OutboxSettleParams].
type OutboxRefusal struct {
	Position int64
	// Error is the publisher's refusal, stored as the event's last error.
	Error string
	// RetryAt is when the event is due again.
	RetryAt time.Time
	// Park parks the event (at [OutboxSettleParams.Now]): it is kept and
	// never claimed again until it is requeued.
	Park bool
}

// OutboxWriteParams are the parameters of [Outbox.Write]: the events of
// one call of outbox.Write, Append or AppendOrdered, written on one
// transaction.
type OutboxWriteParams struct {
	Events []OutboxWriteEvent
	// Ordered is set when tx has already written, and so locked, a row of
	// each event's aggregate that every transaction emitting for it writes
	// first (outbox.AppendOrdered). The number may then be drawn without
	// the aggregate's counter: on PostgreSQL it is the event's position
	// (increasing in commit order within the aggregate, with gaps), where
	// the counter's upsert would cost an index entry and a row kept per
	// aggregate for good. Unset, the number comes from the aggregate's
	// counter in outbox_sequences (1, 2, 3, …), whose upsert takes a row
	// lock that makes a second transaction emitting for the aggregate
	// wait until the first commits, so sequence order is commit order and
	// the relay never sees seq n+1 committed before seq n.
	Ordered bool
	// Later lets a driver that pipelines queue the writes for the
	// transaction's next round trip, or its COMMIT, instead of sending
	// them now; their errors are then reported there, and Write returns no
	// numbers.
	Later bool
}

// OutboxWriteEvent is one event of [OutboxWriteParams], its ID, creation
// time and headers already set.
type OutboxWriteEvent struct {
	// ID is the event's UUID, in its text form.
	ID            string
	Tenant        string
	Type          string
	AggregateType string
	AggregateID   string
	// Payload is the event's JSON body, Headers the JSON object of its
	// propagation headers.
	Payload string
	Headers string
	// CreatedAt is the event's creation time, in UTC; the event is due
	// from then.
	CreatedAt time.Time
}

// OutboxDeletePublishedParams are the parameters of
// [Outbox.DeletePublished].
type OutboxDeletePublishedParams struct {
	// Before is the cutoff: events published before it are deleted.
	Before time.Time
	// Limit bounds the events one call deletes.
	Limit int
}

// OutboxRequeueParams are the parameters of [Outbox.Requeue].
type OutboxRequeueParams struct {
	// ID is the parked event's UUID, in its text form.
	ID string
	// Now is when the event is due again.
	Now time.Time
}

// OutboxListParkedParams are the parameters of [Outbox.ListParked].
type OutboxListParkedParams struct {
	// Limit bounds the events listed.
	Limit int
}

// OutboxStats is the backlog that [Outbox.Stats] reads.
type OutboxStats struct {
	// OldestPending is the creation time, in UTC, of the oldest pending
	// event (the first in position order), zero when none is pending.
	OldestPending time.Time
	// Pending counts the events not parked (refused ones waiting out a
	// backoff included), Parked the parked ones.
	Pending, Parked int64
}
