package orders

import (
	"context"
	"encoding/json"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/outbox"
)

// Outbox events of an order. Each is written in the transaction of the
// change it reports, and only when that change happened: a replayed or
// converged PUT writes none. The payload is the order's representation
// after the change, the bytes of the reply.
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

func emit(ctx context.Context, tx *gorm.DB, typ string, c framework.Change[Order]) error {
	ev, err := outbox.NewEvent(c.Model.TenantID, typ, AggregateType, c.Model.ID.String(), json.RawMessage(c.Representation))
	if err != nil {
		return err
	}
	return outbox.Append(ctx, tx, ev)
}
