package payments

import "errors"

var (
	// ErrProviderTimeout is returned (wrapped) by [Provider.Charge] when the
	// provider's answer was lost or late. The charge may have happened.
	ErrProviderTimeout = errors.New("payments: provider timeout")

	// ErrDownstreamKeyReuse is returned (wrapped) by [Provider.Charge] when
	// the downstream key already names a charge with other parameters.
	ErrDownstreamKeyReuse = errors.New("payments: downstream key reused with different parameters")

	// ErrUnknownPaymentMethod is returned (wrapped) by [Provider.Charge] for
	// a payment method the provider does not know. Nothing was charged.
	ErrUnknownPaymentMethod = errors.New("payments: unknown payment method")

	// ErrChargeNotFound is returned (wrapped) by [Provider.Lookup] when no
	// charge has the downstream key.
	ErrChargeNotFound = errors.New("payments: charge not found")
)
