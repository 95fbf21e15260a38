package outboxsql

import (
	"context"
	"fmt"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
)

// ClaimHead and ClaimTail are the claim of [store.Outbox.Claim] around its
// locking clause: ClaimHead + "FOR UPDATE SKIP LOCKED" + ClaimTail where
// the claim locks, ClaimHead + ClaimTail where it is a plain read. Named
// parameters: @now, @limit.
//
// The candidates ([Candidates]) are the pending events due at @now
// (oldest first, at most @limit): an event never tried is always due,
// whatever the writer's clock said, and a refused one is due at its
// available_at on the relay's clock. Events behind an earlier one of their
// aggregate that waits out a backoff are not candidates at all, so they
// never fill a batch and starve other aggregates. The candidates are
// locked by the clause, and the query keeps those that have no earlier
// pending event of their aggregate outside the claimed set
// ([NoEarlierPendingHead]): a claim always starts at an aggregate's
// earliest pending event, so a later event is never published before an
// earlier one, whoever holds the earlier one. Locked FOR UPDATE SKIP
// LOCKED, concurrent relays claim disjoint sets; an aggregate whose head
// another relay holds is left out. A row locked by a relay that then
// settled it is re-checked after the lock: gone once published, or due
// later once refused, so it is never claimed twice. outbox_events holds
// pending and parked events only (a published one is deleted or moved to
// outbox_published), so the scan in position order and the aggregate's
// (tenant, type, ID, seq) index meet no published rows.
//
// The candidates' rows come out of the CTE as locked (FOR UPDATE returns a
// row's latest version), not read again by their key.
const (
	ClaimHead = `WITH claimed AS (
  SELECT o.* FROM outbox_events o
  WHERE ` + Candidates + `
  ORDER BY position LIMIT @limit `
	ClaimTail = `
)
SELECT c.* FROM claimed c
WHERE ` + NoEarlierPendingHead + `SELECT position FROM claimed` + NoEarlierPendingTail + `
ORDER BY c.position`
)

// Candidates is the condition on an outbox_events row o that makes it a
// candidate of a claim due at @now: pending, due, and behind no earlier
// event of its aggregate that waits out a backoff.
//
// The look for an earlier event, here and in [NoEarlierPendingHead], is a
// scalar subquery rather than NOT EXISTS: it cannot be turned into a
// join, so it always probes the aggregate's index, even on a table the
// planner has no statistics for yet (an anti-join planned for one row
// scanned the whole outbox per claimed event). An aggregate's first event
// (seq 1: numbers start at 1, whether the counter or the position gives
// them) has no earlier one, so neither look runs for it: OR's arms are
// evaluated in order up to the first true (EXPLAIN ANALYZE shows the looks
// run for the later events alone, on PostgreSQL and on MariaDB). The event
// a create emits is its aggregate's first, and the looks were about a
// quarter of the claim's cost on MariaDB.
const Candidates = `o.parked_at IS NULL AND (o.attempts = 0 OR o.available_at <= @now)
    AND (o.seq = 1 OR (
      SELECT q.seq FROM outbox_events q
      WHERE q.tenant_id = o.tenant_id AND q.aggregate_type = o.aggregate_type AND q.aggregate_id = o.aggregate_id
        AND q.seq < o.seq AND q.parked_at IS NULL
        AND q.attempts > 0 AND q.available_at > @now
      LIMIT 1
    ) IS NULL)`

// NoEarlierPendingHead and NoEarlierPendingTail are, around a query of the
// claimed positions, the condition on a claimed row c that no pending
// event of its aggregate before it is left out of the claimed set.
const (
	NoEarlierPendingHead = `c.seq = 1 OR (
  SELECT p.seq FROM outbox_events p
  WHERE p.tenant_id = c.tenant_id AND p.aggregate_type = c.aggregate_type AND p.aggregate_id = c.aggregate_id
    AND p.seq < c.seq AND p.parked_at IS NULL
    AND p.position NOT IN (`
	NoEarlierPendingTail = `)
  LIMIT 1
) IS NULL`
)

// KeepPublishedSQL is the move of published events to outbox_published,
// up to their publication time: the statement ends with the publication
// time's placeholder and the FROM clause that picks the events.
const KeepPublishedSQL = `INSERT INTO outbox_published (position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, published_at)
SELECT position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, `

// eventRow is an outbox_events row as gorm writes it: the columns of
// [store.OutboxEventRow], the table's name.
type eventRow store.OutboxEventRow

func (eventRow) TableName() string { return "outbox_events" }

// events is the table that reads into a []store.OutboxEventRow.
const events = "outbox_events"

// sequenceRow is a row of outbox_sequences.
type sequenceRow struct {
	TenantID      string `gorm:"column:tenant_id;primaryKey"`
	AggregateType string `gorm:"column:aggregate_type;primaryKey"`
	AggregateID   string `gorm:"column:aggregate_id;primaryKey"`
	LastSeq       int64  `gorm:"column:last_seq"`
}

func (sequenceRow) TableName() string { return "outbox_sequences" }

// nextSeq is the conflict clause of the upsert of an aggregate's
// counter: INSERT … (tenant, type, ID, 1) ON CONFLICT (tenant, type, ID)
// DO UPDATE SET last_seq = outbox_sequences.last_seq + 1 RETURNING
// last_seq, which gorm spells for each database.
var nextSeq = clause.OnConflict{
	Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "aggregate_type"}, {Name: "aggregate_id"}},
	DoUpdates: clause.Assignments(map[string]any{"last_seq": gorm.Expr("outbox_sequences.last_seq + 1")}),
}

// Claim runs claimSQL (ClaimHead, the driver's locking clause, ClaimTail)
// on q and returns the claimed rows.
func Claim(ctx context.Context, q *gorm.DB, claimSQL string, p store.OutboxClaimParams) ([]store.OutboxEventRow, error) {
	var rows []store.OutboxEventRow
	if err := q.WithContext(ctx).Raw(claimSQL, map[string]any{"now": p.Now.UTC(), "limit": p.Limit}).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	return rows, nil
}

// Statements is the part of [store.Outbox] that every database spells
// alike. A driver embeds it and adds ClaimLocks, Claim and Vacuum, and
// may replace any method with a faster statement of its own.
type Statements struct{}

// Settle records the refusals one UPDATE each ([SettleRefused]), then
// moves the published events to outbox_published when p.KeepPublished
// and deletes them from outbox_events, one statement each for the whole
// batch. The claim's row locks, or the single relay where the claim does
// not lock, keep the rows as claimed: none was settled by another relay.
func (Statements) Settle(ctx context.Context, tx *gorm.DB, p store.OutboxSettleParams) error {
	if err := SettleRefused(ctx, tx, p); err != nil || len(p.Published) == 0 {
		return err
	}
	if err := KeepPublished(ctx, tx, p); err != nil {
		return err
	}
	if err := tx.WithContext(ctx).Where("position IN ?", p.Published).Delete(&eventRow{}).Error; err != nil {
		return fmt.Errorf("outbox: delete published: %w", err)
	}
	return nil
}

// KeepPublished moves the published events of p to outbox_published when
// p.KeepPublished, in one statement.
func KeepPublished(ctx context.Context, tx *gorm.DB, p store.OutboxSettleParams) error {
	if !p.KeepPublished || len(p.Published) == 0 {
		return nil
	}
	if err := tx.WithContext(ctx).Exec(KeepPublishedSQL+`?
FROM outbox_events WHERE position IN ?`, p.Now.UTC(), p.Published).Error; err != nil {
		return fmt.Errorf("outbox: keep published: %w", err)
	}
	return nil
}

// SettleRefused records the refusals of p on tx: each refused event counts
// an attempt, keeps its error and is due again at its RetryAt, or is
// parked at p.Now.
func SettleRefused(ctx context.Context, tx *gorm.DB, p store.OutboxSettleParams) error {
	if len(p.Refused) > 0 {
		tx = tx.WithContext(ctx)
	}
	for _, r := range p.Refused {
		updates := map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_error": r.Error, "available_at": r.RetryAt.UTC()}
		if r.Park {
			updates["parked_at"] = p.Now.UTC()
		}
		if err := tx.Model(&eventRow{}).Where("position = ?", r.Position).Updates(updates).Error; err != nil {
			return fmt.Errorf("outbox: settle refused event: %w", err)
		}
	}
	return nil
}

// Write numbers each event with the aggregate's counter (the upsert of
// nextSeq as gorm spells it for the database: ON CONFLICT … DO UPDATE on SQLite, ON
// DUPLICATE KEY UPDATE on the MySQL family, whose outbox_sequences has no
// unique key but the primary one) and inserts it: two statements an
// event, sent at once whatever p.Later says. p.Ordered numbers by the
// counter too.
func (Statements) Write(ctx context.Context, tx *gorm.DB, p store.OutboxWriteParams) ([]int64, error) {
	tx = tx.WithContext(ctx)
	seqs := make([]int64, 0, len(p.Events))
	for _, ev := range p.Events {
		counter := sequenceRow{TenantID: ev.Tenant, AggregateType: ev.AggregateType, AggregateID: ev.AggregateID, LastSeq: 1}
		if err := tx.Clauses(nextSeq, clause.Returning{Columns: []clause.Column{{Name: "last_seq"}}}).Create(&counter).Error; err != nil {
			return nil, fmt.Errorf("outbox: sequence of %s %s: %w", ev.AggregateType, ev.AggregateID, err)
		}
		row := eventRow{ID: ev.ID, TenantID: ev.Tenant, Type: ev.Type, AggregateType: ev.AggregateType,
			AggregateID: ev.AggregateID, Seq: counter.LastSeq, Payload: ev.Payload, Headers: ev.Headers,
			CreatedAt: ev.CreatedAt, AvailableAt: ev.CreatedAt}
		if err := tx.Create(&row).Error; err != nil {
			return nil, fmt.Errorf("outbox: write %s: %w", ev.Type, err)
		}
		seqs = append(seqs, counter.LastSeq)
	}
	return seqs, nil
}

// DeletePublished deletes a batch of outbox_published. The batch is a
// derived table inside IN, which MySQL accepts where it refuses LIMIT in
// an IN subquery.
func (Statements) DeletePublished(ctx context.Context, q *gorm.DB, p store.OutboxDeletePublishedParams) (int64, error) {
	res := q.WithContext(ctx).Exec(`DELETE FROM outbox_published WHERE position IN (
  SELECT position FROM (SELECT position FROM outbox_published WHERE published_at < ? ORDER BY published_at LIMIT ?) batch)`,
		p.Before.UTC(), p.Limit)
	return res.RowsAffected, res.Error
}

// Requeue is one UPDATE of the event if it is parked.
func (Statements) Requeue(ctx context.Context, q *gorm.DB, p store.OutboxRequeueParams) (bool, error) {
	res := q.WithContext(ctx).Model(&eventRow{}).Where("id = ? AND parked_at IS NOT NULL", p.ID).
		Updates(map[string]any{"parked_at": nil, "attempts": 0, "available_at": p.Now.UTC(), "last_error": nil})
	return res.RowsAffected == 1, res.Error
}

// ListParked reads the parked events in parking order.
func (Statements) ListParked(ctx context.Context, q *gorm.DB, p store.OutboxListParkedParams) ([]store.OutboxEventRow, error) {
	var rows []store.OutboxEventRow
	if err := q.WithContext(ctx).Table(events).Where("parked_at IS NOT NULL").Order("parked_at, position").
		Limit(p.Limit).Find(&rows).Error; err != nil {
		return nil, err
	}
	return rows, nil
}

// Stats reads the oldest pending event and counts the pending and the
// parked ones.
func (Statements) Stats(ctx context.Context, q *gorm.DB) (store.OutboxStats, error) {
	q = q.WithContext(ctx)
	var oldest []store.OutboxEventRow
	if err := q.Table(events).Select("position", "created_at").Where("parked_at IS NULL").
		Order("position").Limit(1).Find(&oldest).Error; err != nil {
		return store.OutboxStats{}, err
	}
	var st store.OutboxStats
	if err := q.Model(&eventRow{}).Where("parked_at IS NULL").Count(&st.Pending).Error; err != nil {
		return store.OutboxStats{}, err
	}
	if err := q.Model(&eventRow{}).Where("parked_at IS NOT NULL").Count(&st.Parked).Error; err != nil {
		return store.OutboxStats{}, err
	}
	if len(oldest) == 1 {
		st.OldestPending = oldest[0].CreatedAt.UTC()
	}
	return st, nil
}
