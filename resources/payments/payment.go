package payments

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// Statuses of a payment.
const (
	// StatusPending: the payment row exists, the charge's outcome is not
	// recorded yet.
	StatusPending = "pending"
	// StatusSucceeded: the provider charged the payment method.
	StatusSucceeded = "succeeded"
	// StatusFailed: the provider declined; FailureCode says why.
	StatusFailed = "failed"
)

// Payment is the representation of a payment.
type Payment struct {
	ID               string    `json:"id"`
	Status           string    `json:"status"`
	Amount           int64     `json:"amount"`
	Currency         string    `json:"currency"`
	Customer         string    `json:"customer"`
	Description      string    `json:"description,omitempty"`
	PaymentMethod    string    `json:"payment_method"`
	ProviderChargeID string    `json:"provider_charge_id,omitempty"`
	FailureCode      string    `json:"failure_code,omitempty"`
	CreatedAt        time.Time `json:"created_at"`
}

// paymentRow is a row of the payments table (migration 00005).
type paymentRow struct {
	TenantID         string    `gorm:"column:tenant_id;primaryKey"`
	ID               string    `gorm:"column:id;primaryKey"`
	Amount           int64     `gorm:"column:amount"`
	Currency         string    `gorm:"column:currency"`
	Customer         string    `gorm:"column:customer"`
	Description      string    `gorm:"column:description"`
	PaymentMethod    string    `gorm:"column:payment_method"`
	Status           string    `gorm:"column:status"`
	DownstreamKey    string    `gorm:"column:downstream_key"`
	ProviderChargeID *string   `gorm:"column:provider_charge_id"`
	FailureCode      *string   `gorm:"column:failure_code"`
	CreatedAt        time.Time `gorm:"column:created_at"`
	UpdatedAt        time.Time `gorm:"column:updated_at"`
}

const paymentsTable = "payments"

func (r *paymentRow) payment() Payment {
	p := Payment{ID: r.ID, Status: r.Status, Amount: r.Amount, Currency: r.Currency, Customer: r.Customer,
		Description: r.Description, PaymentMethod: r.PaymentMethod, CreatedAt: r.CreatedAt.UTC()}
	if r.ProviderChargeID != nil {
		p.ProviderChargeID = *r.ProviderChargeID
	}
	if r.FailureCode != nil {
		p.FailureCode = *r.FailureCode
	}
	return p
}

func (r *paymentRow) chargeRequest() ChargeRequest {
	return ChargeRequest{Tenant: r.TenantID, DownstreamKey: r.DownstreamKey, Amount: r.Amount, Currency: r.Currency,
		Customer: r.Customer, Description: r.Description, PaymentMethod: r.PaymentMethod}
}

// applyCharge records the provider's answer on the row.
func (r *paymentRow) applyCharge(ch Charge, now time.Time) {
	id := ch.ID
	r.ProviderChargeID = &id
	r.UpdatedAt = now
	if ch.Status == ChargeSucceeded {
		r.Status = StatusSucceeded
		r.FailureCode = nil
		return
	}
	code := ch.FailureCode
	if code == "" {
		code = FailureCardDeclined
	}
	r.Status = StatusFailed
	r.FailureCode = &code
}

func insertPayment(ctx context.Context, tx *gorm.DB, r *paymentRow) error {
	return tx.WithContext(ctx).Table(paymentsTable).Create(r).Error
}

// savePayment writes the row's outcome columns.
func savePayment(ctx context.Context, tx *gorm.DB, r *paymentRow) error {
	return tx.WithContext(ctx).Table(paymentsTable).
		Where("tenant_id = ? AND id = ?", r.TenantID, r.ID).
		Updates(map[string]any{"status": r.Status, "provider_charge_id": r.ProviderChargeID,
			"failure_code": r.FailureCode, "updated_at": r.UpdatedAt}).Error
}

// loadPayment reads the tenant's payment id; not_found when it has none.
func loadPayment(ctx context.Context, db *gorm.DB, tenant, id string) (*paymentRow, error) {
	var r paymentRow
	err := db.WithContext(ctx).Table(paymentsTable).Where("tenant_id = ? AND id = ?", tenant, id).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return nil, framework.Errorf(wire.CodeNotFound, "no payment %s", id)
	}
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// newPaymentID returns "pay_" and 24 random hex digits.
func newPaymentID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "pay_" + hex.EncodeToString(b[:])
}
