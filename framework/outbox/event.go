package outbox

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"go.opentelemetry.io/otel/propagation"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// Event is one fact to tell the world about, written to the outbox in the
// transaction of the effect it reports.
type Event struct {
	// ID identifies the event everywhere: it is the broker's deduplication
	// ID (Nats-Msg-Id) and the consumer inbox's message ID. [Write] sets a
	// new UUID when it is zero.
	ID uuid.UUID
	// Tenant owns the event. Required.
	Tenant string
	// Type names what happened ("payment.succeeded"). Required.
	Type string
	// AggregateType and AggregateID name the thing the event is about
	// ("payment", "pay_…"). Events of one aggregate are numbered by Seq and
	// published in that order. Required.
	AggregateType string
	AggregateID   string
	// Seq is the event's number within its aggregate, increasing in commit
	// order. [Write] and [Append] assign 1, 2, 3, … from the aggregate's
	// counter; [AppendOrdered] assigns, on PostgreSQL, the event's position
	// in the outbox (increasing, with gaps).
	Seq int64
	// Payload is the event's JSON body.
	Payload json.RawMessage
	// Headers carry the propagation fields of the writing request's trace
	// context (traceparent, tracestate), so that a consumer's span can link
	// to the request. [Write] fills them from its ctx.
	Headers map[string]string
	// CreatedAt is when the event was written. [Write] sets it to the
	// current UTC time when it is zero.
	CreatedAt time.Time
}

// NewEvent returns an event with payload marshalled as JSON.
func NewEvent(tenant, typ, aggregateType, aggregateID string, payload any) (Event, error) {
	body, err := json.Marshal(payload)
	if err != nil {
		return Event{}, fmt.Errorf("outbox: payload of %s: %w", typ, err)
	}
	return Event{Tenant: tenant, Type: typ, AggregateType: aggregateType, AggregateID: aggregateID, Payload: body}, nil
}

// eventOf is the event of an outbox_events row.
func eventOf(r *store.OutboxEventRow) (Event, error) {
	id, err := uuid.Parse(r.ID)
	if err != nil {
		return Event{}, fmt.Errorf("outbox: event %d has a bad ID: %w", r.Position, err)
	}
	ev := Event{ID: id, Tenant: r.TenantID, Type: r.Type, AggregateType: r.AggregateType, AggregateID: r.AggregateID,
		Seq: r.Seq, Payload: json.RawMessage(r.Payload), CreatedAt: r.CreatedAt.UTC()}
	if r.Headers != "" && r.Headers != "{}" {
		if err := json.Unmarshal([]byte(r.Headers), &ev.Headers); err != nil {
			return Event{}, fmt.Errorf("outbox: event %s has bad headers: %w", r.ID, err)
		}
	}
	return ev, nil
}

// Write adds events to the outbox on tx, the transaction of the effect they
// report: they commit with it or not at all. Call it only on the path where
// the effect happened (the insert took place, the charge was recorded), never
// on a replay. It is the transactional twin of nothing else: the outbox is
// only ever written in the caller's transaction.
//
// Write gives each event its ID (when zero), its creation time (when zero),
// its sequence number within its aggregate and the trace context of ctx, and
// returns the events as written.
func Write(ctx context.Context, tx *gorm.DB, events ...Event) ([]Event, error) {
	return write(ctx, tx, false, false, events)
}

// Append is [Write] for a caller that does not need the events back (their
// sequence numbers): on PostgreSQL (and on MariaDB through a pool that
// batches), in a transaction of [store.DB.Write], each event's insert is
// pipelined with the transaction's next statement or
// its COMMIT instead of costing a round trip of its own, and its error is
// reported there.
func Append(ctx context.Context, tx *gorm.DB, events ...Event) error {
	_, err := write(ctx, tx, true, false, events)
	return err
}

// AppendOrdered is [Append] for events whose aggregate tx has already
// written, and so holds locked: a row inserted, or updated fenced on its
// version, earlier in tx, that every transaction emitting for the aggregate
// writes before it emits (the PUT engine's resource row, in its write
// hooks). That row lock already orders two such transactions, so on
// PostgreSQL the event skips the aggregate's counter (an upsert, an index
// entry, and a row kept per aggregate for good) and its sequence number is
// its position in the outbox, drawn after the lock was taken: increasing in
// commit order within the aggregate, but with gaps, not 1, 2, 3. On SQLite,
// where one transaction writes at a time and a statement costs no round
// trip, the counter numbers it as [Append] does.
//
// Number an aggregate's events one way from its first AppendOrdered on:
// a counter's number after a position could go back. Numbers the counter
// gave before stay below: a position is never less than the number of
// events written before it.
func AppendOrdered(ctx context.Context, tx *gorm.DB, events ...Event) error {
	_, err := write(ctx, tx, true, true, events)
	return err
}

// write prepares events and writes them on tx through its driver's
// [store.Outbox.Write].
func write(ctx context.Context, tx *gorm.DB, later, ordered bool, events []Event) ([]Event, error) {
	if tx == nil {
		return nil, errors.New("outbox: Write needs the caller's transaction")
	}
	d, err := store.DriverOf(tx)
	if err != nil {
		return nil, fmt.Errorf("outbox: %w", err)
	}
	var carrier propagation.MapCarrier
	var written []Event // what Write returns; Append returns nothing
	if !later {
		written = make([]Event, 0, len(events))
	}
	p := store.OutboxWriteParams{Events: make([]store.OutboxWriteEvent, 0, len(events)), Ordered: ordered, Later: later}
	for _, ev := range events {
		if ev.Tenant == "" || ev.Type == "" || ev.AggregateType == "" || ev.AggregateID == "" {
			return nil, fmt.Errorf("%w: tenant, type and aggregate are required", ErrInvalidEvent)
		}
		if len(ev.Payload) == 0 {
			ev.Payload = json.RawMessage("null")
		}
		if !json.Valid(ev.Payload) {
			return nil, fmt.Errorf("%w: the payload of %s is not JSON", ErrInvalidEvent, ev.Type)
		}
		if ev.ID == uuid.Nil {
			id, err := uuid.NewV7()
			if err != nil {
				return nil, err
			}
			ev.ID = id
		}
		if ev.CreatedAt.IsZero() {
			ev.CreatedAt = time.Now()
		}
		ev.CreatedAt = ev.CreatedAt.UTC()
		if ev.Headers == nil {
			if carrier == nil {
				carrier = propagation.MapCarrier{}
				propagation.TraceContext{}.Inject(ctx, carrier)
			}
			if len(carrier) > 0 {
				ev.Headers = map[string]string(carrier)
			}
		}
		headers, err := json.Marshal(ev.Headers)
		if err != nil {
			return nil, err
		}
		if !later {
			written = append(written, ev)
		}
		p.Events = append(p.Events, store.OutboxWriteEvent{ID: ev.ID.String(), Tenant: ev.Tenant, Type: ev.Type,
			AggregateType: ev.AggregateType, AggregateID: ev.AggregateID, Payload: string(ev.Payload),
			Headers: string(headers), CreatedAt: ev.CreatedAt})
	}
	seqs, err := d.Outbox().Write(ctx, tx, p)
	if err != nil {
		return nil, err
	}
	for i := range written {
		written[i].Seq = seqs[i]
	}
	return written, nil
}
