package orders

import (
	"context"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/outbox"
)

// Outbox events of an order. Each is written in the transaction of the
// change it reports, and only when that change happened: a replayed or
// converged PUT writes none. The payload is the order's representation
// after the change.
const (
	// EventReplaced: a draft order's body was replaced (version + 1).
	EventReplaced = "order.replaced"
	// EventSubmitted: the order moved from draft to submitted.
	EventSubmitted = "order.submitted"
	// AggregateType is the aggregate type of order events; the aggregate
	// ID is the order's UUID.
	AggregateType = "order"
)

// EmitCreated writes order.created for a newly inserted order on tx, the
// insert's transaction.
func EmitCreated(ctx context.Context, tx *gorm.DB, cmd Command, m framework.Meta) error {
	return emit(ctx, tx, EventCreated, cmd, m)
}

// EmitReplaced writes order.replaced for an order whose body was replaced,
// on the replace's transaction; m is the order's state after the replace.
func EmitReplaced(ctx context.Context, tx *gorm.DB, cmd Command, m framework.Meta) error {
	return emit(ctx, tx, EventReplaced, cmd, m)
}

// EmitSubmitted writes order.submitted on the transaction that set the
// order's status to submitted; m is the order's state after it.
func EmitSubmitted(ctx context.Context, tx *gorm.DB, cmd Command, m framework.Meta) error {
	return emit(ctx, tx, EventSubmitted, cmd, m)
}

func emit(ctx context.Context, tx *gorm.DB, typ string, cmd Command, m framework.Meta) error {
	ev, err := outbox.NewEvent(m.Tenant, typ, AggregateType, m.ID.String(), Render(cmd, m))
	if err != nil {
		return err
	}
	_, err = outbox.Write(ctx, tx, ev)
	return err
}
