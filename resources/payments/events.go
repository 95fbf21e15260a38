package payments

import (
	"context"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/outbox"
)

// Outbox events of a payment, written in the phase that records the
// provider's answer: exactly once per payment, whether the request, a retry
// or the recovery worker recorded it. The payload is the payment's
// representation.
const (
	EventSucceeded = "payment.succeeded"
	EventDeclined  = "payment.declined"
	// AggregateType is the aggregate type of payment events.
	AggregateType = "payment"
)

// emitOutcome writes the event of a recorded outcome on tx.
func emitOutcome(ctx context.Context, tx *gorm.DB, row *paymentRow) error {
	typ := EventSucceeded
	if row.Status != StatusSucceeded {
		typ = EventDeclined
	}
	ev, err := outbox.NewEvent(row.TenantID, typ, AggregateType, row.ID, row.payment())
	if err != nil {
		return err
	}
	_, err = outbox.Write(ctx, tx, ev)
	return err
}
