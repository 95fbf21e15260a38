package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/pipeline"
)

// settlement is what the relay did with one claimed event.
type settlement struct {
	position int64
	// published is true when the publisher accepted the event.
	published bool
	// refused is true when the publisher refused it; err says why.
	refused bool
	err     string
	// retryAt is when a refused event is due again; park parks it instead.
	retryAt time.Time
	park    bool
}

// claimedEvent is an event with its row position.
type claimedEvent struct {
	position int64
	attempts int
	event    Event
}

// relayStore is the one seam for the relay's SQL that differs between
// PostgreSQL and SQLite: how a batch is claimed. Everything else is spelled
// the same in both and lives in gormRelayStore.
type relayStore interface {
	// withBatch claims up to limit pending events due at now, hands them to
	// publish (every aggregate's events in seq order, starting at its
	// earliest pending event) and records the settlements publish returns.
	// It returns the number of events claimed.
	withBatch(ctx context.Context, now time.Time, limit int, publish func([]claimedEvent) []settlement) (int, error)
	// deletePublished deletes up to limit events published before cutoff.
	deletePublished(ctx context.Context, cutoff time.Time, limit int) (int64, error)
	// oldestPending returns the creation time of the oldest pending event
	// (zero when none is pending) and the number of parked events.
	stats(ctx context.Context) (oldest time.Time, pending, parked int64, err error)
	// requeue makes a parked event pending again; false when id names no
	// parked event.
	requeue(ctx context.Context, id string, now time.Time) (bool, error)
	// vacuum removes the dead rows of outbox_events (PostgreSQL), or does
	// nothing; errVacuumRefused when the user may not.
	vacuum(ctx context.Context) error
}

// errVacuumRefused: the database user may not vacuum outbox_events.
var errVacuumRefused = errors.New("outbox: vacuum refused")

var (
	_ relayStore = (*postgresRelayStore)(nil)
	_ relayStore = (*sqliteRelayStore)(nil)
	_ relayStore = (*mysqlRelayStore)(nil)
)

func newRelayStore(db *store.DB, keepPublished bool) (relayStore, error) {
	base := gormRelayStore{db: db, keepPublished: keepPublished}
	switch db.Driver.Name() {
	case "postgres":
		return &postgresRelayStore{gormRelayStore: base}, nil
	case "sqlite":
		return &sqliteRelayStore{base}, nil
	case "mysql":
		return &mysqlRelayStore{base}, nil
	}
	return nil, fmt.Errorf("outbox: unsupported dialect %q", db.Driver.Name())
}

// claimSQL selects the pending events due at @now (oldest first, at most
// @limit): an event never tried is always due, whatever the writer's clock
// said, and a refused one is due at its available_at on the relay's clock.
// Events behind an earlier one of their aggregate that waits out a backoff
// are not candidates at all, so they never fill a batch and starve other
// aggregates. The candidates are locked with %s, and the query keeps those
// that have no earlier pending event of their aggregate outside the claimed
// set: a claim always starts at an
// aggregate's earliest pending event, so a later event is never published
// before an earlier one, whoever holds the earlier one. On PostgreSQL the
// rows are locked FOR UPDATE SKIP LOCKED, so concurrent relays claim
// disjoint sets; an aggregate whose head another relay holds is left out.
// A row locked by a relay that then settled it is re-checked after the
// lock: gone once published, or due later once refused, so it is never
// claimed twice. outbox_events holds pending and parked events only (a
// published one is deleted or moved to outbox_published), so the scan in
// position order and the aggregate's (tenant, type, ID, seq) index meet no
// published rows.
// The candidates' rows come out of the CTE as locked (FOR UPDATE returns
// a row's latest version), not read again by their key.
// The look for an earlier event is a scalar subquery rather than NOT
// EXISTS: it cannot be turned into a join, so it always probes the
// aggregate's index, even on a table the planner has no statistics for yet
// (an anti-join planned for one row scanned the whole outbox per claimed
// event).
const claimSQL = `WITH claimed AS (
  SELECT o.* FROM outbox_events o
  WHERE parked_at IS NULL AND (attempts = 0 OR available_at <= @now)
    AND (
      SELECT q.seq FROM outbox_events q
      WHERE q.tenant_id = o.tenant_id AND q.aggregate_type = o.aggregate_type AND q.aggregate_id = o.aggregate_id
        AND q.seq < o.seq AND q.parked_at IS NULL
        AND q.attempts > 0 AND q.available_at > @now
      LIMIT 1
    ) IS NULL
  ORDER BY position LIMIT @limit %s
)
SELECT c.* FROM claimed c
WHERE (
  SELECT p.seq FROM outbox_events p
  WHERE p.tenant_id = c.tenant_id AND p.aggregate_type = c.aggregate_type AND p.aggregate_id = c.aggregate_id
    AND p.seq < c.seq AND p.parked_at IS NULL
    AND p.position NOT IN (SELECT position FROM claimed)
  LIMIT 1
) IS NULL
ORDER BY c.position`

// postgresRelayStore claims in a transaction that it holds while the batch
// is published and settled: the row locks keep other relays off the batch,
// and a relay that dies mid-batch loses its connection, which rolls back its
// claim and releases the rows for another relay. Only outbox rows are
// locked, so writers are never held up by a slow broker.
type postgresRelayStore struct {
	gormRelayStore
	// mayVacuum: the user was found to own outbox_events or the
	// database (vacuum is called by the relay's one goroutine).
	mayVacuum bool
}

func (s *postgresRelayStore) withBatch(ctx context.Context, now time.Time, limit int, publish func([]claimedEvent) []settlement) (int, error) {
	return s.lockedBatch(ctx, now, limit, publish, func(tx *gorm.DB) error {
		// The planner cannot know how few rows the claim's filters leave
		// (it assumes it scans the whole backlog), so past some thousands
		// of pending events its cost passes jit_above_cost and JIT
		// compilation made a 5 ms claim of 50,000 pending events take 100
		// ms. Sent with the claim, not in a round trip of its own.
		return pipeline.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Exec("SET LOCAL jit = off") }, nil)
	})
}

// lockedBatch claims a batch FOR UPDATE SKIP LOCKED in a write
// transaction held while the batch is published and settled, after
// prepare (when set) on the transaction.
func (s *gormRelayStore) lockedBatch(ctx context.Context, now time.Time, limit int, publish func([]claimedEvent) []settlement,
	prepare func(tx *gorm.DB) error) (int, error) {
	var n int
	err := s.db.Write(ctx, func(tx *gorm.DB) error {
		if prepare != nil {
			if err := prepare(tx); err != nil {
				return err
			}
		}
		batch, err := s.claim(tx, fmt.Sprintf(claimSQL, "FOR UPDATE SKIP LOCKED"), now, limit)
		if err != nil || len(batch) == 0 {
			return err
		}
		n = len(batch)
		return s.settle(tx, now, publish(batch))
	})
	return n, err
}

// vacuum runs VACUUM on outbox_events, skipping it when another vacuum
// holds the table. PostgreSQL answers a user who owns neither the table
// nor the database with a warning, not an error, and does nothing: the
// relay checks the owners instead.
func (s *postgresRelayStore) vacuum(ctx context.Context) error {
	if !s.mayVacuum {
		if err := s.checkVacuum(ctx); err != nil {
			return err
		}
	}
	return s.db.Gorm.WithContext(ctx).Exec("VACUUM (SKIP_LOCKED) outbox_events").Error
}

// checkVacuum sets mayVacuum once the user is found to own the table or
// the database, and returns errVacuumRefused when it does not.
func (s *postgresRelayStore) checkVacuum(ctx context.Context) error {
	var may bool
	if err := s.db.Gorm.WithContext(ctx).Raw(`SELECT pg_has_role(current_user, c.relowner, 'USAGE')
    OR pg_has_role(current_user, (SELECT datdba FROM pg_database WHERE datname = current_database()), 'USAGE')
FROM pg_class c WHERE c.oid = to_regclass('outbox_events')`).Scan(&may).Error; err != nil {
		return err
	}
	if !may {
		return errVacuumRefused
	}
	s.mayVacuum = true
	return nil
}

func (s *sqliteRelayStore) vacuum(context.Context) error { return nil }

// mysqlRelayStore claims as PostgreSQL's does, in a transaction held while
// the batch is published and settled, its rows locked FOR UPDATE SKIP
// LOCKED (MariaDB 10.6+ takes the locks of the claimed CTE's rows), so
// that several relays claim disjoint batches. There is no vacuum: InnoDB
// purges deleted rows itself.
type mysqlRelayStore struct{ gormRelayStore }

func (s *mysqlRelayStore) withBatch(ctx context.Context, now time.Time, limit int, publish func([]claimedEvent) []settlement) (int, error) {
	return s.lockedBatch(ctx, now, limit, publish, nil)
}

func (s *mysqlRelayStore) vacuum(context.Context) error { return nil }

// sqliteRelayStore claims with a plain read and settles in a short write
// transaction afterwards: SQLite has one writer at a time, so holding a
// write transaction across a publish would stall every request. It supports
// one relay per database.
type sqliteRelayStore struct{ gormRelayStore }

func (s *sqliteRelayStore) withBatch(ctx context.Context, now time.Time, limit int, publish func([]claimedEvent) []settlement) (int, error) {
	batch, err := s.claim(s.db.Gorm.WithContext(ctx), fmt.Sprintf(claimSQL, ""), now, limit)
	if err != nil || len(batch) == 0 {
		return 0, s.db.Classify(err)
	}
	done := publish(batch)
	return len(batch), s.db.Write(ctx, func(tx *gorm.DB) error { return s.settle(tx, now, done) })
}

// gormRelayStore is the SQL both dialects share.
type gormRelayStore struct {
	db *store.DB
	// keepPublished moves published events to outbox_published instead
	// of only deleting them ([Config.Retention] > 0).
	keepPublished bool
}

func (s *gormRelayStore) claim(q *gorm.DB, sql string, now time.Time, limit int) ([]claimedEvent, error) {
	var rows []eventRow
	if err := q.Raw(sql, map[string]any{"now": now.UTC(), "limit": limit}).Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("outbox: claim: %w", err)
	}
	batch := make([]claimedEvent, 0, len(rows))
	for i := range rows {
		ev, err := rows[i].event()
		if err != nil {
			return nil, err
		}
		batch = append(batch, claimedEvent{position: rows[i].Position, attempts: rows[i].Attempts, event: ev})
	}
	return batch, nil
}

// keepPublishedPostgres moves the published events $2 to outbox_published,
// published at $1.
const keepPublishedPostgres = keepPublished + `$1
FROM outbox_events WHERE position = ANY($2)`

// keepPublished is the move of published events to outbox_published, up
// to their publication time.
const keepPublished = `INSERT INTO outbox_published (position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, published_at)
SELECT position, id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, attempts, `

func (s *gormRelayStore) settle(tx *gorm.DB, now time.Time, done []settlement) error {
	var published []int64
	for _, st := range done {
		switch {
		case st.published:
			published = append(published, st.position)
		case st.refused:
			updates := map[string]any{"attempts": gorm.Expr("attempts + 1"), "last_error": st.err, "available_at": st.retryAt.UTC()}
			if st.park {
				updates["parked_at"] = now.UTC()
			}
			if err := tx.Model(&eventRow{}).Where("position = ?", st.position).Updates(updates).Error; err != nil {
				return fmt.Errorf("outbox: settle refused event: %w", err)
			}
		}
	}
	if len(published) == 0 {
		return nil
	}
	if pipeline.Pipelined(tx) {
		// With the COMMIT, in one round trip, as one statement whatever
		// the batch's size.
		if s.keepPublished {
			if err := pipeline.LaterSQL(tx, keepPublishedPostgres, []any{now.UTC(), published},
				func(err error) error { return fmt.Errorf("outbox: keep published: %w", err) }); err != nil {
				return err
			}
		}
		return pipeline.LaterSQL(tx, "DELETE FROM outbox_events WHERE position = ANY($1)", []any{published},
			func(err error) error { return fmt.Errorf("outbox: delete published: %w", err) })
	}
	if s.keepPublished {
		if err := tx.Exec(keepPublished+`?
FROM outbox_events WHERE position IN ?`, now.UTC(), published).Error; err != nil {
			return fmt.Errorf("outbox: keep published: %w", err)
		}
	}
	// The claim's row locks (PostgreSQL) or the single relay (SQLite) keep
	// these rows as claimed: none was settled by another relay.
	if err := tx.Where("position IN ?", published).Delete(&eventRow{}).Error; err != nil {
		return fmt.Errorf("outbox: delete published: %w", err)
	}
	return nil
}

func (s *gormRelayStore) deletePublished(ctx context.Context, cutoff time.Time, limit int) (int64, error) {
	// The batch is a derived table inside IN, which MySQL accepts where it
	// refuses LIMIT in an IN subquery.
	res := s.db.Gorm.WithContext(ctx).Exec(`DELETE FROM outbox_published WHERE position IN (
  SELECT position FROM (SELECT position FROM outbox_published WHERE published_at < ? ORDER BY published_at LIMIT ?) batch)`,
		cutoff.UTC(), limit)
	return res.RowsAffected, s.db.Classify(res.Error)
}

func (s *gormRelayStore) requeue(ctx context.Context, id string, now time.Time) (bool, error) {
	res := s.db.Gorm.WithContext(ctx).Model(&eventRow{}).Where("id = ? AND parked_at IS NOT NULL", id).
		Updates(map[string]any{"parked_at": nil, "attempts": 0, "available_at": now.UTC(), "last_error": nil})
	return res.RowsAffected == 1, s.db.Classify(res.Error)
}

func (s *gormRelayStore) stats(ctx context.Context) (time.Time, int64, int64, error) {
	q := s.db.Gorm.WithContext(ctx)
	var oldest []eventRow
	if err := q.Select("position", "created_at").Where("parked_at IS NULL").
		Order("position").Limit(1).Find(&oldest).Error; err != nil {
		return time.Time{}, 0, 0, s.db.Classify(err)
	}
	var pending, parked int64
	if err := q.Model(&eventRow{}).Where("parked_at IS NULL").Count(&pending).Error; err != nil {
		return time.Time{}, 0, 0, s.db.Classify(err)
	}
	if err := q.Model(&eventRow{}).Where("parked_at IS NOT NULL").Count(&parked).Error; err != nil {
		return time.Time{}, 0, 0, s.db.Classify(err)
	}
	var t time.Time
	if len(oldest) == 1 {
		t = oldest[0].CreatedAt.UTC()
	}
	return t, pending, parked, nil
}
