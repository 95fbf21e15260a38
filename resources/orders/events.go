package orders

import (
	"context"
	"encoding/json"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/outbox"
)

// Outbox events of an order. Each is written in the transaction of the
// change it reports, and only when that change happened: a replayed or
// converged PUT writes none. The payload is the order's representation
// after the change, the bytes of the reply. An order's events are numbered
// in commit order, with gaps on PostgreSQL (outbox.AppendOrdered).
const (
	// EventCreated: a new order was inserted.
	EventCreated = "order.created"
	// EventReplaced: a draft order's body was replaced (version + 1).
	EventReplaced = "order.replaced"
	// EventSubmitted: the order moved from draft to submitted.
	EventSubmitted = "order.submitted"
	// AggregateType is the aggregate type of order events; the aggregate
	// ID is the order's UUID.
	AggregateType = "order"
)

// emit runs in the engine's write hooks, after the order's row was
// inserted or updated (fenced on its version) in tx: that row lock orders
// the order's events, so they are numbered by their outbox position
// (outbox.AppendOrdered) rather than by a counter row per order.
func emit(ctx context.Context, tx *gorm.DB, typ string, c collection.Change[Order]) error {
	return outbox.AppendOrdered(ctx, tx, outbox.Event{Tenant: c.Model.TenantID, Type: typ,
		AggregateType: AggregateType, AggregateID: c.Model.ID.String(), Payload: json.RawMessage(c.Representation)})
}
