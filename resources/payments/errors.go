package payments

import (
	"errors"
	"net/http"

	"github.com/retrysafe/retrysafe/wire"
)

// CodeCardDeclined is the problem code of a payment the provider declined:
// 402, stored under the key and replayed; a new attempt needs a new key.
const CodeCardDeclined wire.Code = "card_declined"

// Codes returns the business problem codes payments answers with; [New]
// registers them on its engine.
func Codes() []wire.CodeInfo {
	return []wire.CodeInfo{
		{Code: CodeCardDeclined, Status: http.StatusPaymentRequired, Title: "Card declined"},
	}
}

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
