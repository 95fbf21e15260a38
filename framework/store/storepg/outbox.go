package storepg

import (
	"context"
	"fmt"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/outboxsql"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// Outbox returns the outbox's statements on PostgreSQL: the claim locks
// its rows FOR UPDATE SKIP LOCKED, so several relays run at once; an
// event's write is one statement and a batch's settle two, queued for
// the transaction's COMMIT; and the relay vacuums outbox_events.
func (Driver) Outbox() store.Outbox { return outbox{} }

// outbox is [store.Outbox] on PostgreSQL: the shared statements, with
// PostgreSQL's own where they save round trips.
type outbox struct{ outboxsql.Statements }

var _ store.Outbox = outbox{}

// claimSQL locks the claimed rows, skipping those another relay holds.
const claimSQL = outboxsql.ClaimHead + "FOR UPDATE SKIP LOCKED" + outboxsql.ClaimTail

// ClaimLocks is true: the claim's transaction holds its rows' locks until
// the batch is settled.
func (outbox) ClaimLocks() bool { return true }

// Claim turns JIT compilation off for the claim's transaction first. The
// planner cannot know how few rows the claim's filters leave (it assumes
// it scans the whole backlog), so past some thousands of pending events
// its cost passes jit_above_cost, and JIT compilation made a 5 ms claim
// of 50,000 pending events take 100 ms. SET LOCAL is queued, so it is
// sent with the claim, not in a round trip of its own.
func (outbox) Claim(ctx context.Context, tx *gorm.DB, p store.OutboxClaimParams) ([]store.OutboxEventRow, error) {
	if err := pipeline.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Exec("SET LOCAL jit = off") }, nil); err != nil {
		return nil, err
	}
	return outboxsql.Claim(ctx, tx, claimSQL, p)
}

// keepPublishedSQL moves the published events $2 to outbox_published,
// published at $1.
const keepPublishedSQL = outboxsql.KeepPublishedSQL + `$1
FROM outbox_events WHERE position = ANY($2)`

// deletePublishedSQL deletes the published events $1 from outbox_events.
const deletePublishedSQL = "DELETE FROM outbox_events WHERE position = ANY($1)"

// Settle queues the move and the delete of the published events for the
// transaction's COMMIT, in one round trip, as one statement each whatever
// the batch's size (an array parameter, ANY($1)). On a transaction that
// does not pipeline (one of the application's own) it runs the shared
// statements.
func (o outbox) Settle(ctx context.Context, tx *gorm.DB, p store.OutboxSettleParams) error {
	if !pipeline.Pipelined(tx) {
		return o.Statements.Settle(ctx, tx, p)
	}
	if err := outboxsql.SettleRefused(ctx, tx, p); err != nil || len(p.Published) == 0 {
		return err
	}
	if p.KeepPublished {
		if err := pipeline.LaterSQL(tx, keepPublishedSQL, []any{p.Now.UTC(), p.Published},
			func(err error) error { return fmt.Errorf("outbox: keep published: %w", err) }); err != nil {
			return err
		}
	}
	return pipeline.LaterSQL(tx, deletePublishedSQL, []any{p.Published},
		func(err error) error { return fmt.Errorf("outbox: delete published: %w", err) })
}

// nextSeqSQL increments an aggregate's counter and returns the new value
// (tenant, aggregate type, aggregate ID). Its row lock makes a second
// transaction emitting for the same aggregate wait until the first
// commits, so sequence order is commit order.
const nextSeqSQL = `INSERT INTO outbox_sequences (tenant_id, aggregate_type, aggregate_id, last_seq) VALUES (?, ?, ?, 1)
ON CONFLICT (tenant_id, aggregate_type, aggregate_id) DO UPDATE SET last_seq = outbox_sequences.last_seq + 1
RETURNING last_seq`

// writeEventSQL is nextSeqSQL and the event's INSERT in one statement (a
// data-modifying WITH, which SQLite lacks; there the two statements cost
// no network round trip).
const writeEventSQL = `WITH s AS (` + nextSeqSQL + `)
INSERT INTO outbox_events (id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, available_at)
SELECT ?::uuid, ?, ?, ?, ?, s.last_seq, ?, ?, ?::timestamptz, ?::timestamptz FROM s
RETURNING seq`

// writeOrderedSQL is the INSERT of an ordered event: its sequence number
// is its position, drawn once from the position's sequence (BIGSERIAL,
// migration 00002) for both columns.
const writeOrderedSQL = `INSERT INTO outbox_events (position, seq, id, tenant_id, type, aggregate_type, aggregate_id, payload, headers, created_at, available_at)
SELECT n.p, n.p, ?::uuid, ?, ?, ?, ?, ?, ?, ?::timestamptz, ?::timestamptz FROM (SELECT nextval('outbox_events_position_seq') AS p) n`

// writeOrderedReturningSQL is writeOrderedSQL returning the number, for
// a write that is not queued (the queued one reads no rows back).
const writeOrderedReturningSQL = writeOrderedSQL + `
RETURNING seq`

// Write writes each event in one statement: the counter's upsert feeds
// the insert, or (p.Ordered) the position is the sequence number. With
// p.Later, in a transaction of store.DB.Write, the statement is queued for
// the transaction's next round trip or its COMMIT ([pipeline.LaterExec]).
func (outbox) Write(ctx context.Context, tx *gorm.DB, p store.OutboxWriteParams) ([]int64, error) {
	tx = tx.WithContext(ctx)
	var seqs []int64
	if !p.Later {
		seqs = make([]int64, 0, len(p.Events))
	}
	for _, ev := range p.Events {
		sql, args := writeEventSQL, []any{ev.Tenant, ev.AggregateType, ev.AggregateID,
			ev.ID, ev.Tenant, ev.Type, ev.AggregateType, ev.AggregateID, ev.Payload, ev.Headers,
			ev.CreatedAt, ev.CreatedAt}
		if p.Ordered {
			sql, args = writeOrderedSQL, args[3:]
			if !p.Later {
				sql = writeOrderedReturningSQL
			}
		}
		typ := ev.Type
		wrap := func(err error) error { return fmt.Errorf("outbox: write %s: %w", typ, err) }
		if p.Later {
			if err := pipeline.LaterExec(tx, sql, args, wrap); err != nil {
				return nil, err
			}
			continue
		}
		var seq int64
		if err := tx.Raw(sql, args...).Find(&seq).Error; err != nil {
			return nil, wrap(err)
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}

// Vacuum runs VACUUM (SKIP_LOCKED) on outbox_events, after checking that
// the user owns the table or the database: PostgreSQL answers anyone else
// with a warning, not an error, and does nothing. The check is one
// catalog query, run with every vacuum (the relay vacuums every few
// seconds at most) so that the driver keeps no state.
func (outbox) Vacuum(ctx context.Context, q *gorm.DB) error {
	q = q.WithContext(ctx)
	var may bool
	if err := q.Raw(`SELECT pg_has_role(current_user, c.relowner, 'USAGE')
    OR pg_has_role(current_user, (SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
FROM pg_class c WHERE c.oid = to_regclass('outbox_events')`).Scan(&may).Error; err != nil {
		return err
	}
	if !may {
		return store.ErrVacuumRefused
	}
	return q.Exec("VACUUM (SKIP_LOCKED) outbox_events").Error
}
