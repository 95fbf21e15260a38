package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/store"
)

// ParkedEvent is an event the relay parked after [Config.MaxAttempts]
// refusals, as [ListParked] reads it.
type ParkedEvent struct {
	Event
	// Attempts counts the publisher's refusals.
	Attempts int
	// LastError is the publisher's last refusal.
	LastError string
	ParkedAt  time.Time
}

// Stats is the outbox's backlog, as [ReadStats] reads it.
type Stats struct {
	// Pending counts the events waiting to be published (refused ones
	// waiting out a backoff included).
	Pending int64
	// Parked counts the parked events.
	Parked int64
	// OldestPending is when the oldest pending event was written (zero
	// when none is pending).
	OldestPending time.Time
}

// ListParked lists up to limit parked events of db's outbox, oldest
// parked first, for an operator's tooling; a relay need not run.
func ListParked(ctx context.Context, db *store.DB, limit int) ([]ParkedEvent, error) {
	if db == nil || limit <= 0 {
		return nil, errors.New("outbox: ListParked needs a database and a positive limit")
	}
	rows, err := db.Driver.Outbox().ListParked(ctx, db.Gorm, store.OutboxListParkedParams{Limit: limit})
	if err != nil {
		return nil, db.Classify(err)
	}
	out := make([]ParkedEvent, 0, len(rows))
	for i := range rows {
		ev, err := eventOf(&rows[i])
		if err != nil {
			return nil, err
		}
		p := ParkedEvent{Event: ev, Attempts: rows[i].Attempts, ParkedAt: rows[i].ParkedAt.UTC()}
		if rows[i].LastError != nil {
			p.LastError = *rows[i].LastError
		}
		out = append(out, p)
	}
	return out, nil
}

// Requeue is [Relay.Requeue] without a relay, for an operator's tooling:
// it makes the parked event id of db's outbox pending again, due at now,
// with a fresh count of attempts; a running relay publishes it. It
// returns [ErrNotParked] when id names no parked event.
func Requeue(ctx context.Context, db *store.DB, id uuid.UUID, now time.Time) error {
	if db == nil {
		return errors.New("outbox: Requeue needs a database")
	}
	ok, err := db.Driver.Outbox().Requeue(ctx, db.Gorm, store.OutboxRequeueParams{ID: id.String(), Now: now})
	if err != nil {
		return db.Classify(err)
	}
	if !ok {
		return fmt.Errorf("%w: %s", ErrNotParked, id)
	}
	return nil
}

// ReadStats reads the backlog of db's outbox.
func ReadStats(ctx context.Context, db *store.DB) (Stats, error) {
	if db == nil {
		return Stats{}, errors.New("outbox: ReadStats needs a database")
	}
	st, err := readStats(ctx, db)
	if err != nil {
		return Stats{}, err
	}
	return Stats{Pending: st.Pending, Parked: st.Parked, OldestPending: st.OldestPending}, nil
}

// readStats reads the backlog of db's outbox ([store.Outbox.Stats]).
func readStats(ctx context.Context, db *store.DB) (store.OutboxStats, error) {
	st, err := db.Driver.Outbox().Stats(ctx, db.Gorm)
	return st, db.Classify(err)
}
