package payments

import (
	"strings"

	"github.com/go-playground/validator/v10"

	"github.com/retrysafe/retrysafe/framework"
)

// Command is the body of POST /v1/payments.
type Command struct {
	// Amount is in minor units, 1..99999999.
	Amount framework.Integer `json:"amount" validate:"min=1,max=99999999"`
	// Currency is an ISO 4217 code; it is accepted in either case and
	// normalized to lowercase ("usd").
	Currency string `json:"currency" validate:"required,payments_currency"`
	Customer string `json:"customer" validate:"required,max=64"`
	// Description is optional, at most 500 characters.
	Description string `json:"description,omitempty" validate:"max=500"`
	// PaymentMethod defaults to [MethodCardVisa].
	PaymentMethod string `json:"payment_method" validate:"oneof=pm_card_visa pm_card_declined pm_card_timeout_after_charge"`
}

// Default implements [framework.Defaulter].
func (c *Command) Default() {
	if c.PaymentMethod == "" {
		c.PaymentMethod = MethodCardVisa
	}
}

// Normalize implements [framework.Normalizer]: "USD" and "usd" are one
// currency and one fingerprint.
func (c *Command) Normalize() { c.Currency = strings.ToLower(c.Currency) }

// registerValidations adds the payments_currency tag to v: an ISO 4217 code
// in either case.
func registerValidations(v *validator.Validate) error {
	return v.RegisterValidation("payments_currency", func(fl validator.FieldLevel) bool {
		return v.Var(strings.ToUpper(fl.Field().String()), "iso4217") == nil
	})
}
