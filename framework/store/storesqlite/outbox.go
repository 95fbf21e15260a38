package storesqlite

import (
	"context"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/outboxsql"
)

// Outbox returns the outbox's statements on SQLite: the shared ones, with
// a claim that locks nothing and no vacuum. Run one relay per database.
func (Driver) Outbox() store.Outbox { return outbox{} }

// outbox is [store.Outbox] on SQLite.
type outbox struct{ outboxsql.Statements }

var _ store.Outbox = outbox{}

// claimSQL is the claim without a locking clause, which SQLite lacks.
const claimSQL = outboxsql.ClaimHead + outboxsql.ClaimTail

// ClaimLocks is false: SQLite has one writer at a time, so a write
// transaction held across a publish would stall every request. The
// claim is a plain read and the relay settles in a short write
// transaction afterwards, which supports one relay per database.
func (outbox) ClaimLocks() bool { return false }

// Claim reads the batch on q, the handle.
func (outbox) Claim(ctx context.Context, q *gorm.DB, p store.OutboxClaimParams) ([]store.OutboxEventRow, error) {
	return outboxsql.Claim(ctx, q, claimSQL, p)
}

// Vacuum does nothing: SQLite reuses a deleted row's space at once.
func (outbox) Vacuum(context.Context, *gorm.DB) error { return nil }

// nextSeqSQL increments the aggregate's counter (the first event's is 1)
// and returns the new value.
const nextSeqSQL = `INSERT INTO outbox_sequences (tenant_id, aggregate_type, aggregate_id, last_seq) VALUES (?, ?, ?, 1)
ON CONFLICT (tenant_id, aggregate_type, aggregate_id) DO UPDATE SET last_seq = outbox_sequences.last_seq + 1
RETURNING last_seq`

// writeEventSQL inserts an event numbered by nextSeqSQL; attempts,
// last_error and parked_at take their defaults (0, NULL, NULL).
const writeEventSQL = `INSERT INTO outbox_events (id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, available_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Write numbers each event with the aggregate's counter and inserts it,
// as the shared statements do, in two fixed statements an event sent
// straight to tx's connection: no gorm statement is built for them, and
// no RETURNING of the position is read back. SQLite has one writer at a
// time, so what a write transaction spends in the process, it spends
// holding the database's write lock. Each statement is reported to tx's
// gorm logger with its placeholders, never its values.
func (outbox) Write(ctx context.Context, tx *gorm.DB, p store.OutboxWriteParams) ([]int64, error) {
	seqs := make([]int64, 0, len(p.Events))
	for _, ev := range p.Events {
		var seq int64
		start := time.Now()
		err := tx.Statement.ConnPool.QueryRowContext(ctx, nextSeqSQL, ev.Tenant, ev.AggregateType, ev.AggregateID).Scan(&seq)
		tx.Logger.Trace(ctx, start, func() (string, int64) { return nextSeqSQL, 1 }, err)
		if err != nil {
			return nil, fmt.Errorf("outbox: sequence of %s %s: %w", ev.AggregateType, ev.AggregateID, err)
		}
		args := []any{ev.ID, ev.Tenant, ev.Type, ev.AggregateType, ev.AggregateID, seq, ev.Payload, ev.Headers, ev.CreatedAt, ev.CreatedAt}
		start = time.Now()
		_, err = tx.Statement.ConnPool.ExecContext(ctx, writeEventSQL, args...)
		tx.Logger.Trace(ctx, start, func() (string, int64) { return writeEventSQL, 1 }, err)
		if err != nil {
			return nil, fmt.Errorf("outbox: write %s: %w", ev.Type, err)
		}
		seqs = append(seqs, seq)
	}
	return seqs, nil
}
