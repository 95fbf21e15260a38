package sandbox

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/resources/payments"
)

// Config configures [New]. The zero value is ready to use.
type Config struct {
	// Now is the clock of charge timestamps. Defaults to time.Now.
	Now func() time.Time
	// MaxHang bounds how long a lost answer blocks its caller, when the
	// caller's context does not end first. Defaults to 30s.
	MaxHang time.Duration
	// Logger receives one event per charge. Defaults to discarding them.
	Logger *slog.Logger
}

// Provider is the sandbox payment provider.
type Provider struct {
	db      *store.DB
	now     func() time.Time
	maxHang time.Duration
	logger  *slog.Logger
}

var _ payments.Provider = (*Provider)(nil)

// New returns a Provider whose ledger is the sandbox_charges table of db
// (migration 00004).
func New(db *store.DB, cfg Config) (*Provider, error) {
	if db == nil {
		return nil, errors.New("sandbox: New needs a database")
	}
	if cfg.MaxHang < 0 {
		return nil, errors.New("sandbox: MaxHang must not be negative")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.MaxHang == 0 {
		cfg.MaxHang = 30 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Provider{db: db, now: cfg.Now, maxHang: cfg.MaxHang, logger: cfg.Logger}, nil
}

// chargeRow is a row of sandbox_charges.
type chargeRow struct {
	TenantID      string    `gorm:"column:tenant_id;primaryKey"`
	ID            string    `gorm:"column:id;primaryKey"`
	DownstreamKey string    `gorm:"column:downstream_key"`
	Amount        int64     `gorm:"column:amount"`
	Currency      string    `gorm:"column:currency"`
	Customer      string    `gorm:"column:customer"`
	Description   string    `gorm:"column:description"`
	PaymentMethod string    `gorm:"column:payment_method"`
	Status        string    `gorm:"column:status"`
	FailureCode   string    `gorm:"column:failure_code"`
	Answered      bool      `gorm:"column:answered"`
	CreatedAt     time.Time `gorm:"column:created_at"`
}

const table = "sandbox_charges"

func (r *chargeRow) charge() payments.Charge {
	return payments.Charge{ID: r.ID, Tenant: r.TenantID, DownstreamKey: r.DownstreamKey, Amount: r.Amount,
		Currency: r.Currency, Customer: r.Customer, Description: r.Description, PaymentMethod: r.PaymentMethod,
		Status: r.Status, FailureCode: r.FailureCode, CreatedAt: r.CreatedAt.UTC()}
}

// sameRequest reports whether req asks for the charge r records.
func (r *chargeRow) sameRequest(req payments.ChargeRequest) bool {
	return r.Amount == req.Amount && r.Currency == req.Currency && r.Customer == req.Customer &&
		r.PaymentMethod == req.PaymentMethod
}

// outcome is what a payment method does: its status, failure code and
// whether its first answer arrives.
func outcome(method string) (status, failure string, answered bool, err error) {
	switch method {
	case payments.MethodCardVisa:
		return payments.ChargeSucceeded, "", true, nil
	case payments.MethodCardDeclined:
		return payments.ChargeFailed, payments.FailureCardDeclined, true, nil
	case payments.MethodCardTimeoutAfterCharge:
		return payments.ChargeSucceeded, "", false, nil
	}
	return "", "", false, fmt.Errorf("sandbox: %w: %q", payments.ErrUnknownPaymentMethod, method)
}

// Charge implements [payments.Provider]: it records a charge for
// req.DownstreamKey unless one exists, and returns the one charge the key
// names. A decline is returned as a charge with Status
// [payments.ChargeFailed] and a nil error.
func (p *Provider) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	if req.Tenant == "" || req.DownstreamKey == "" {
		return payments.Charge{}, errors.New("sandbox: a charge needs a tenant and a downstream key")
	}
	if req.Amount <= 0 || req.Currency == "" {
		return payments.Charge{}, errors.New("sandbox: a charge needs a positive amount and a currency")
	}
	status, failure, answered, err := outcome(req.PaymentMethod)
	if err != nil {
		return payments.Charge{}, err
	}
	fresh := chargeRow{TenantID: req.Tenant, ID: newChargeID(), DownstreamKey: req.DownstreamKey,
		Amount: req.Amount, Currency: req.Currency, Customer: req.Customer, Description: req.Description,
		PaymentMethod: req.PaymentMethod, Status: status, FailureCode: failure, Answered: answered,
		CreatedAt: p.now().UTC().Truncate(time.Microsecond)}
	var (
		cur     chargeRow
		created bool
	)
	// InnoDB picks one of several concurrent upserts of a new key as a
	// deadlock's victim when the table has two unique indexes (MySQL's ON
	// DUPLICATE KEY UPDATE locks both). The victim's transaction was rolled
	// back whole and the write is idempotent under the downstream key, so
	// WriteRetrying runs it again; a run after the winner committed finds
	// its row by the plain read that comes first and takes no lock.
	err = p.db.WriteRetrying(ctx, func(tx *gorm.DB) error {
		return p.insertOrFind(tx, &fresh, &cur, &created)
	})
	if err != nil {
		return payments.Charge{}, fmt.Errorf("sandbox: charge: %w", err)
	}
	if !cur.sameRequest(req) {
		return payments.Charge{}, fmt.Errorf("sandbox: %w: charge %s", payments.ErrDownstreamKeyReuse, cur.ID)
	}
	p.logger.LogAttrs(ctx, slog.LevelInfo, "sandbox charge",
		slog.String("tenant", req.Tenant), slog.String("charge", cur.ID), slog.Bool("created", created),
		slog.String("status", cur.Status))
	if !cur.Answered {
		lost, err := p.takeAnswer(ctx, &cur)
		if err != nil {
			return payments.Charge{}, err
		}
		if lost {
			return payments.Charge{}, p.loseAnswer(ctx, cur.ID)
		}
	}
	return cur.charge(), nil
}

// insertOrFind inserts fresh unless a charge of its downstream key exists,
// and puts the charge of the key in cur.
func (p *Provider) insertOrFind(tx *gorm.DB, fresh, cur *chargeRow, created *bool) error {
	*created = false
	found := tx.Table(table).Where("tenant_id = ? AND downstream_key = ?", fresh.TenantID, fresh.DownstreamKey).
		Limit(1).Find(cur)
	if found.Error != nil || found.RowsAffected == 1 {
		return found.Error
	}
	ins := tx.Table(table).Clauses(clause.OnConflict{
		Columns:   []clause.Column{{Name: "tenant_id"}, {Name: "downstream_key"}},
		DoNothing: true,
	}).Create(fresh)
	if ins.Error != nil {
		return ins.Error
	}
	if *created = ins.RowsAffected == 1; *created {
		*cur = *fresh
		return nil
	}
	return tx.Table(table).Where("tenant_id = ? AND downstream_key = ?", fresh.TenantID, fresh.DownstreamKey).Take(cur).Error
}

// takeAnswer flips the charge's answered flag in one statement; the one call
// that flips it loses its answer.
func (p *Provider) takeAnswer(ctx context.Context, r *chargeRow) (lost bool, err error) {
	// A concurrent upsert of the key can make InnoDB roll this update back
	// as a deadlock's victim; it changed nothing then, and runs again.
	err = p.db.WriteRetrying(ctx, func(tx *gorm.DB) error {
		res := tx.Table(table).
			Where("tenant_id = ? AND downstream_key = ? AND answered = ?", r.TenantID, r.DownstreamKey, false).
			Update("answered", true)
		lost = res.RowsAffected == 1
		return res.Error
	})
	if err != nil {
		return false, fmt.Errorf("sandbox: take the answer: %w", err)
	}
	return lost, nil
}

// loseAnswer blocks like a provider that never answers, until the caller
// gives up (or MaxHang passes), and reports the timeout.
func (p *Provider) loseAnswer(ctx context.Context, chargeID string) error {
	p.logger.LogAttrs(ctx, slog.LevelInfo, "sandbox answer lost", slog.String("charge", chargeID))
	timer := time.NewTimer(p.maxHang)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return fmt.Errorf("sandbox: %w: %w", payments.ErrProviderTimeout, ctx.Err())
	case <-timer.C:
		return fmt.Errorf("sandbox: %w: no answer within %s", payments.ErrProviderTimeout, p.maxHang)
	}
}

// Lookup implements [payments.Provider]: the charge the downstream key names.
// It never loses an answer.
func (p *Provider) Lookup(ctx context.Context, tenant, downstreamKey string) (payments.Charge, error) {
	var r chargeRow
	err := p.db.Gorm.WithContext(ctx).Table(table).
		Where("tenant_id = ? AND downstream_key = ?", tenant, downstreamKey).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return payments.Charge{}, fmt.Errorf("sandbox: %w", payments.ErrChargeNotFound)
	}
	if err != nil {
		return payments.Charge{}, fmt.Errorf("sandbox: lookup: %w", p.db.Classify(err))
	}
	return r.charge(), nil
}

// List returns the tenant's charges, oldest first; with status set, only
// those with that status.
func (p *Provider) List(ctx context.Context, tenant, status string) ([]payments.Charge, error) {
	q := p.db.Gorm.WithContext(ctx).Table(table).Where("tenant_id = ?", tenant)
	if status != "" {
		q = q.Where("status = ?", status)
	}
	var rows []chargeRow
	if err := q.Order("created_at, id").Find(&rows).Error; err != nil {
		return nil, fmt.Errorf("sandbox: list: %w", p.db.Classify(err))
	}
	charges := make([]payments.Charge, len(rows))
	for i := range rows {
		charges[i] = rows[i].charge()
	}
	return charges, nil
}

// newChargeID returns "ch_" and 24 random hex digits.
func newChargeID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "ch_" + hex.EncodeToString(b[:])
}
