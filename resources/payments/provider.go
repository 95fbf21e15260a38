package payments

import (
	"context"
	"time"
)

// Charge statuses reported by a [Provider].
const (
	ChargeSucceeded = "succeeded"
	ChargeFailed    = "failed"
)

// FailureCardDeclined is the failure code of a declined card.
const FailureCardDeclined = "card_declined"

// ChargeRequest asks a [Provider] to charge a payment method once.
type ChargeRequest struct {
	Tenant string
	// DownstreamKey identifies the charge at the provider: every call with
	// the same tenant and key returns the same charge, so a resumed attempt
	// can ask again without charging twice. The payments resource derives it
	// from (tenant, operation, idempotency key, step).
	DownstreamKey string
	Amount        int64
	Currency      string
	Customer      string
	Description   string
	PaymentMethod string
}

// Charge is a provider's record of one charge attempt. A decline is a charge
// too: Status is [ChargeFailed] with a FailureCode, and asking again with the
// same downstream key declines again.
type Charge struct {
	ID            string
	Tenant        string
	DownstreamKey string
	Amount        int64
	Currency      string
	Customer      string
	Description   string
	PaymentMethod string
	Status        string
	FailureCode   string
	CreatedAt     time.Time
}

// Provider charges payment methods. Implementations must deduplicate by
// (tenant, downstream key) and return these errors:
//
//   - [ErrProviderTimeout] (wrapped) when the answer did not arrive in time:
//     the charge may or may not exist; ask again with the same key, or
//     [Provider.Lookup] it.
//   - [ErrDownstreamKeyReuse] (wrapped) when the key already names a charge
//     with different parameters; nothing was charged.
//   - [ErrUnknownPaymentMethod] (wrapped) when the payment method does not
//     exist; nothing was charged.
//   - [ErrChargeNotFound] (wrapped), from Lookup only, when the key names no
//     charge.
type Provider interface {
	// Charge charges req.PaymentMethod, or returns the charge that
	// req.DownstreamKey already names.
	Charge(ctx context.Context, req ChargeRequest) (Charge, error)
	// Lookup returns the charge a downstream key names, for reconciliation.
	Lookup(ctx context.Context, tenant, downstreamKey string) (Charge, error)
}

// The payment methods of the sandbox provider, the only ones a payment
// accepts. Each card behaves deterministically, so tests and demos can
// produce every outcome on purpose.
const (
	// MethodCardVisa is charged successfully.
	MethodCardVisa = "pm_card_visa"
	// MethodCardDeclined is declined with [FailureCardDeclined].
	MethodCardDeclined = "pm_card_declined"
	// MethodCardTimeoutAfterCharge is charged, but the provider's first
	// answer for its downstream key is lost: the call times out after the
	// charge committed. Later calls and lookups return the charge.
	MethodCardTimeoutAfterCharge = "pm_card_timeout_after_charge"
)
