package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Billing stands for the third party this service calls: an invoicing
// service that issues invoices and emails them, assigns its own IDs
// (in_…, em_…), and deduplicates by the caller's downstream key, as
// Stripe's Idempotency-Key does. It keeps its records in the
// billing_records table of the same database, so that every process of
// the service sees one Billing and tests can count its records.
type Billing struct {
	db  *gorm.DB
	now func() time.Time
	// loseAnswer decides whether the first answer of a new record is
	// lost after the record committed (a timeout after the effect).
	loseAnswer func(BillingCall) bool
	// calls counts the calls of Do this process made, for tests: the
	// records alone cannot tell a second call with the same key.
	calls atomic.Int64
}

// BillingCall asks Billing to do one thing once.
type BillingCall struct {
	Tenant string
	// Key is the downstream key: every call with the same tenant and key
	// returns the record of the first one.
	Key string
	// Kind is "invoice" or "email".
	Kind string
	// Request says what is asked ("cus_1 4200 EUR"); a call that repeats a
	// key with another request is refused with ErrBillingKeyReuse.
	Request string
}

// BillingRecord is what Billing did for a key.
type BillingRecord struct {
	ID        string
	Kind      string
	Request   string
	CreatedAt time.Time
}

// The errors of Billing.
var (
	// ErrBillingTimeout: no answer in time; the call may have taken effect.
	// Ask again with the same key, or Lookup it.
	ErrBillingTimeout = errors.New("billing: no answer in time")
	// ErrBillingKeyReuse: the key names a record of another request.
	ErrBillingKeyReuse = errors.New("billing: downstream key reused with another request")
	// ErrBillingNotFound: Lookup found no record for the key.
	ErrBillingNotFound = errors.New("billing: no record for this key")
)

type billingRow struct {
	TenantID      string    `gorm:"column:tenant_id;primaryKey"`
	DownstreamKey string    `gorm:"column:downstream_key;primaryKey"`
	ID            string    `gorm:"column:id"`
	Kind          string    `gorm:"column:kind"`
	Request       string    `gorm:"column:request"`
	CreatedAt     time.Time `gorm:"column:created_at"`
}

func (billingRow) TableName() string { return "billing_records" }

func (r billingRow) record() BillingRecord {
	return BillingRecord{ID: r.ID, Kind: r.Kind, Request: r.Request, CreatedAt: r.CreatedAt.UTC()}
}

// Do performs call unless its key already names a record, and returns the
// one record of the key.
func (b *Billing) Do(ctx context.Context, call BillingCall) (BillingRecord, error) {
	b.calls.Add(1)
	prefix := map[string]string{"invoice": "in_", "email": "em_"}[call.Kind]
	if call.Tenant == "" || call.Key == "" || prefix == "" {
		return BillingRecord{}, fmt.Errorf("billing: a call needs a tenant, a key and a known kind, not %q", call.Kind)
	}
	fresh := billingRow{TenantID: call.Tenant, DownstreamKey: call.Key, ID: newID(prefix),
		Kind: call.Kind, Request: call.Request, CreatedAt: b.now().UTC().Truncate(time.Microsecond)}
	var (
		row     billingRow
		created bool
	)
	err := b.db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
		ins := tx.Clauses(clause.OnConflict{DoNothing: true}).Create(&fresh)
		if ins.Error != nil {
			return ins.Error
		}
		if created = ins.RowsAffected == 1; created {
			row = fresh
			return nil
		}
		return tx.Where("tenant_id = ? AND downstream_key = ?", call.Tenant, call.Key).Take(&row).Error
	})
	switch {
	case err != nil:
		return BillingRecord{}, fmt.Errorf("billing: %w", err)
	case row.Kind != call.Kind || row.Request != call.Request:
		return BillingRecord{}, fmt.Errorf("%w: %s", ErrBillingKeyReuse, row.ID)
	case created && b.loseAnswer != nil && b.loseAnswer(call):
		return BillingRecord{}, ErrBillingTimeout
	}
	return row.record(), nil
}

// Lookup returns the record a key names, for reconciliation.
func (b *Billing) Lookup(ctx context.Context, tenant, key string) (BillingRecord, error) {
	var rows []billingRow
	if err := b.db.WithContext(ctx).Where("tenant_id = ? AND downstream_key = ?", tenant, key).Limit(1).Find(&rows).Error; err != nil {
		return BillingRecord{}, fmt.Errorf("billing: %w", err)
	}
	if len(rows) == 0 {
		return BillingRecord{}, ErrBillingNotFound
	}
	return rows[0].record(), nil
}
