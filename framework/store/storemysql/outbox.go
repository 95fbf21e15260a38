package storemysql

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/outboxsql"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// Outbox returns the outbox's statements on the MySQL family: the shared
// ones, with a claim that locks its rows FOR UPDATE SKIP LOCKED, so that
// several relays run at once, and no vacuum.
func (Driver) Outbox() store.Outbox { return outbox{} }

// outbox is [store.Outbox] on the MySQL family.
type outbox struct{ outboxsql.Statements }

var _ store.Outbox = outbox{}

// A claim is two statements in the relay's transaction: lockSQL locks the
// candidates and returns their positions, then readSQL reads the locked
// rows and keeps those behind no pending event of their aggregate left
// out of the claim. Two statements rather than the shared claim's one, for
// what InnoDB and MariaDB do with it:
//
//   - A locking read returns a row's latest committed version, a plain
//     read a snapshot taken at the statement's first plain read. In one
//     statement the snapshot could be taken before the scan locked a row
//     committed after it, and miss that row's earlier event of its
//     aggregate, committed just before it and held by another relay: the
//     later event would be published first. readSQL's snapshot is taken
//     after every lock is held, so it sees each claimed event's earlier
//     ones, and the locked rows as they are.
//   - MariaDB materializes a CTE once for each reference: the shared
//     claim's set was locked and read again for its NOT IN, a second run
//     that need not find the same rows.
//   - The CTE's rows were materialized with their payloads, into an
//     on-disk temporary table (MariaDB keeps no TEXT column in memory):
//     lockSQL returns positions alone, and readSQL reads each row once,
//     by its primary key.
//
// Both run without MariaDB's subquery cache (the optimizer_switch set for
// the statement alone): it keeps the result of each correlated look for
// an earlier event of the aggregate in a temporary table keyed by the
// outer row, and a claim's candidates are mostly one per aggregate, so
// every look is a miss that pays for the table (a claim of 100 events of
// 100 aggregates cost MariaDB 2.9 ms of CPU with the cache and 1.1 ms
// without). A transaction that claimed 100 events, each its aggregate's
// first, and rolled back cost MariaDB 1.0–1.5 ms of CPU with the shared
// claim and 0.6–0.7 ms with these two statements.
const (
	noSubqueryCache = "SET STATEMENT optimizer_switch = 'subquery_cache=off' FOR "
	lockSQL         = noSubqueryCache + `SELECT o.position FROM outbox_events o
WHERE ` + outboxsql.Candidates + `
ORDER BY o.position LIMIT @limit FOR UPDATE SKIP LOCKED`
	claimedJSON = `JSON_TABLE(@claimed, '$[*]' COLUMNS (position BIGINT PATH '$'))`
	readSQL     = noSubqueryCache + `SELECT c.* FROM ` + claimedJSON + ` claimed
STRAIGHT_JOIN outbox_events c FORCE INDEX (PRIMARY) ON c.position = claimed.position
WHERE ` + outboxsql.NoEarlierPendingHead + `SELECT position FROM ` + claimedJSON + ` k` + outboxsql.NoEarlierPendingTail
)

// ClaimLocks is true: the claim's transaction holds its rows' locks until
// the batch is settled, as on PostgreSQL.
func (outbox) ClaimLocks() bool { return true }

// Claim claims the batch on tx, the relay's write transaction: lockSQL,
// then readSQL, the rows in position order.
func (outbox) Claim(ctx context.Context, tx *gorm.DB, p store.OutboxClaimParams) ([]store.OutboxEventRow, error) {
	tx = tx.WithContext(ctx)
	var positions []int64
	if err := tx.Raw(lockSQL, map[string]any{"now": p.Now.UTC(), "limit": p.Limit}).Scan(&positions).Error; err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	if len(positions) == 0 {
		return nil, nil
	}
	claimed, err := json.Marshal(positions)
	if err != nil {
		return nil, err
	}
	var rows []store.OutboxEventRow
	if err := tx.Raw(readSQL, map[string]any{"claimed": string(claimed)}).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	slices.SortFunc(rows, func(a, b store.OutboxEventRow) int { return cmp.Compare(a.Position, b.Position) })
	return rows, nil
}

// deletePublishedSQL deletes a batch of published events in one
// statement, their positions a JSON array: the array's rows, read first
// (STRAIGHT_JOIN), find each event by its primary key, and only those
// rows are read and locked. A DELETE of position IN (…) would not do: on
// a small table, and an outbox holds little more than the events being
// claimed, MariaDB plans it as a scan of the whole table, FORCE INDEX
// included, and a DELETE's scan locks each row it reads, so it waited for
// every event another relay had claimed or a writer had not yet committed
// (two relays deadlocked on each other's rows, and the events of the one
// rolled back were published again). One DELETE by primary key an event
// read and locked no other row, but cost MariaDB three times the CPU of
// this statement: 100 events took 2.3 ms, where this takes 0.6 ms.
const deletePublishedSQL = `DELETE o FROM JSON_TABLE(?, '$[*]' COLUMNS (position BIGINT PATH '$')) published
STRAIGHT_JOIN outbox_events o FORCE INDEX (PRIMARY) ON o.position = published.position`

// Settle records the refusals and moves the published events as the
// shared statements do, then deletes the published events in one
// statement (deletePublishedSQL): queued for the COMMIT's round trip in
// a transaction that batches, at once anywhere else.
func (outbox) Settle(ctx context.Context, tx *gorm.DB, p store.OutboxSettleParams) error {
	if err := outboxsql.SettleRefused(ctx, tx, p); err != nil || len(p.Published) == 0 {
		return err
	}
	if err := outboxsql.KeepPublished(ctx, tx, p); err != nil {
		return err
	}
	positions, err := json.Marshal(p.Published)
	if err != nil {
		return err
	}
	wrap := func(err error) error { return fmt.Errorf("outbox: delete published: %w", err) }
	if pipeline.Pipelined(tx) {
		return pipeline.LaterSQL(tx, deletePublishedSQL, []any{string(positions)}, wrap)
	}
	if err := tx.WithContext(ctx).Exec(deletePublishedSQL, string(positions)).Error; err != nil {
		return wrap(err)
	}
	return nil
}

// Vacuum does nothing: InnoDB purges deleted rows itself.
func (outbox) Vacuum(context.Context, *gorm.DB) error { return nil }

// nextSeqSQL increments the aggregate's counter (the first event's is 1)
// and leaves the number in the session's @retrysafe_seq, for the insert
// that follows it in the same query: MariaDB evaluates the VALUES, then,
// on a duplicate key, the assignment, each assigning the variable. Its
// first value carries its batch mark ([markHere]): an error before the
// values are read is read as the statement before it's, a queued write
// of the same transaction, or the previous event's insert.
const nextSeqSQL = `INSERT INTO outbox_sequences (last_seq, tenant_id, aggregate_type, aggregate_id)
VALUES (` + markHere + ` * 0 + (@retrysafe_seq := 1), ?, ?, ?)
ON DUPLICATE KEY UPDATE last_seq = (@retrysafe_seq := outbox_sequences.last_seq + 1)`

// writeEventSQL inserts an event numbered @retrysafe_seq (nextSeqSQL);
// its first value carries its batch mark too, so that an error before its
// values are read is read as its counter's.
const writeEventSQL = `INSERT INTO outbox_events (seq, id, tenant_id, type, aggregate_type, aggregate_id, payload, headers, created_at, available_at)
VALUES (` + markHere + ` * 0 + @retrysafe_seq, ?, ?, ?, ?, ?, ?, ?, ?, ?)`

// Write numbers and inserts each event. With p.Later, in a transaction
// that batches ([batchTx]), an event is two queued statements, the
// counter's upsert handing its number to the insert through a session
// variable, and both go out with the transaction's next statement or its
// COMMIT. Anywhere else the shared statements run at once and return the
// numbers.
func (o outbox) Write(ctx context.Context, tx *gorm.DB, p store.OutboxWriteParams) ([]int64, error) {
	if !p.Later || !pipeline.Pipelined(tx) {
		return o.Statements.Write(ctx, tx, p)
	}
	for _, ev := range p.Events {
		typ, aggType, aggID := ev.Type, ev.AggregateType, ev.AggregateID
		if err := pipeline.LaterSQL(tx, nextSeqSQL, []any{ev.Tenant, ev.AggregateType, ev.AggregateID}, func(err error) error {
			return fmt.Errorf("outbox: sequence of %s %s: %w", aggType, aggID, err)
		}); err != nil {
			return nil, err
		}
		if err := pipeline.LaterSQL(tx, writeEventSQL, []any{ev.ID, ev.Tenant, ev.Type, ev.AggregateType, ev.AggregateID,
			ev.Payload, ev.Headers, ev.CreatedAt, ev.CreatedAt}, func(err error) error {
			return fmt.Errorf("outbox: write %s: %w", typ, err)
		}); err != nil {
			return nil, err
		}
	}
	return nil, nil
}
