package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
)

// CodeInvoiceNotIssued is this service's own code: an email of an invoice
// whose issue is still being reconciled. It is retryable with the same
// key, so it is answered (with Retry-After) but never stored.
const CodeInvoiceNotIssued wire.Code = "invoice_not_issued"

// The recovery points of both operations: the local row committed,
// pending, with the downstream key of its billing call; then the billing
// service's answer committed with the stored response.
const (
	pointRecorded = "recorded"
	pointDone     = "done"
)

// Statuses of invoices and emails.
const (
	statusPending = "pending"
	statusIssued  = "issued"
	statusSent    = "sent"
)

// billingTimeout bounds one call to the billing service.
const billingTimeout = 2 * time.Second

// CreateCommand is the body of POST /v1/invoices.
type CreateCommand struct {
	Customer string            `json:"customer" validate:"required,max=64"`
	Amount   framework.Integer `json:"amount" validate:"min=1,max=99999999"`
	Currency string            `json:"currency" validate:"required,iso4217"`
}

// EmailCommand is the body of POST /v1/invoices/{id}/emails.
type EmailCommand struct {
	To string `json:"to" validate:"required,email,max=254"`
}

// Invoice is the representation of an invoice.
type Invoice struct {
	ID string `json:"id"`
	// BillingID is the billing service's ID of the invoice, absent while
	// the invoice is pending.
	BillingID string    `json:"billing_id,omitempty"`
	Customer  string    `json:"customer"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// Email is the representation of a sent email of an invoice.
type Email struct {
	ID        string    `json:"id"`
	InvoiceID string    `json:"invoice_id"`
	To        string    `json:"to"`
	BillingID string    `json:"billing_id"`
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

type invoiceRow struct {
	TenantID      string    `gorm:"column:tenant_id;primaryKey"`
	ID            string    `gorm:"column:id;primaryKey"`
	Customer      string    `gorm:"column:customer"`
	Amount        int64     `gorm:"column:amount"`
	Currency      string    `gorm:"column:currency"`
	Status        string    `gorm:"column:status"`
	DownstreamKey string    `gorm:"column:downstream_key"`
	BillingID     *string   `gorm:"column:billing_id"`
	CreatedAt     time.Time `gorm:"column:created_at"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

func (invoiceRow) TableName() string { return "invoices" }

func (r *invoiceRow) invoice() Invoice {
	inv := Invoice{ID: r.ID, Customer: r.Customer, Amount: r.Amount, Currency: r.Currency, Status: r.Status,
		CreatedAt: r.CreatedAt.UTC()}
	if r.BillingID != nil {
		inv.BillingID = *r.BillingID
	}
	return inv
}

type emailRow struct {
	TenantID      string    `gorm:"column:tenant_id;primaryKey"`
	ID            string    `gorm:"column:id;primaryKey"`
	InvoiceID     string    `gorm:"column:invoice_id"`
	Recipient     string    `gorm:"column:recipient"`
	Status        string    `gorm:"column:status"`
	DownstreamKey string    `gorm:"column:downstream_key"`
	BillingID     *string   `gorm:"column:billing_id"`
	CreatedAt     time.Time `gorm:"column:created_at"`
	UpdatedAt     time.Time `gorm:"column:updated_at"`
}

func (emailRow) TableName() string { return "invoice_emails" }

// Invoices declares the two phased operations and serves the routes.
type Invoices struct {
	engine  *framework.Engine
	billing *Billing
	create  *postkeys.Endpoint[CreateCommand]
	email   *postkeys.Endpoint[EmailCommand]
}

// NewInvoices registers invoice_not_issued on the engine, then declares
// POST /v1/invoices and POST /v1/invoices/{id}/emails in phased mode: each
// commits its pending row in a first phase, calls the billing service with
// a downstream key derived from the idempotency key, and commits the
// answer with the stored response; a reconcile settles an attempt whose
// answer was lost by looking the key up at the billing service.
func NewInvoices(engine *framework.Engine, keys *postkeys.Adapter, billing *Billing) (*Invoices, error) {
	if err := engine.RegisterCodes(wire.CodeInfo{
		Code: CodeInvoiceNotIssued, Status: http.StatusConflict, Title: "Invoice not issued yet", Retryable: true,
	}); err != nil {
		return nil, err
	}
	s := &Invoices{engine: engine, billing: billing}
	var err error
	if s.create, err = postkeys.Register(keys, postkeys.Operation[CreateCommand]{
		Name: "invoices.create", Mode: postkeys.Phased,
		RunFunc: s.runCreate, ReconcileFunc: s.reconcileCreate,
	}); err != nil {
		return nil, err
	}
	if s.email, err = postkeys.Register(keys, postkeys.Operation[EmailCommand]{
		Name: "invoices.email", Mode: postkeys.Phased,
		// Answered before any phase, so nothing is stored: the key stays
		// usable.
		Problems: []wire.Code{wire.CodeNotFound, CodeInvoiceNotIssued},
		RunFunc:  s.runEmail, ReconcileFunc: s.reconcileEmail,
	}); err != nil {
		return nil, err
	}
	return s, nil
}

// Mount registers POST /invoices, GET /invoices/:id and
// POST /invoices/:id/emails on g, which runs server.RequireAuth.
func (s *Invoices) Mount(g gin.IRouter) {
	g.POST("/invoices", s.create.Handle)
	g.GET("/invoices/:id", s.get)
	g.POST("/invoices/:id/emails", s.email.Handle)
}

// Describe describes the routes of Mount under prefix ("/v1").
func (s *Invoices) Describe(prefix string) []framework.RouteDescription {
	id := framework.ParamDescription{Name: "id", Required: true, Description: "the invoice's ID (inv_…)"}
	email := s.email.Describe(prefix+"/invoices/{id}/emails", http.StatusCreated, Email{})
	email.PathParams = []framework.ParamDescription{id}
	return []framework.RouteDescription{
		s.create.Describe(prefix+"/invoices", http.StatusCreated, Invoice{}),
		framework.DescribeGet(prefix+"/invoices/{id}", "invoices.get", "Read an invoice", reflect.TypeFor[Invoice](), id),
		email,
	}
}

// runCreate is the RunFunc of POST /v1/invoices. A fresh attempt commits
// the pending invoice; a resumed one (a retry that took over an attempt
// whose lease ran out) continues from its row.
func (s *Invoices) runCreate(ctx context.Context, run *postkeys.Run[CreateCommand]) (postkeys.Response, error) {
	if run.RecoveryPoint() != postkeys.PointStarted {
		return s.reconcileCreate(ctx, run)
	}
	cmd, _ := run.Command()
	now := run.Now()
	row := &invoiceRow{TenantID: run.Tenant(), ID: newID("inv_"), Customer: cmd.Customer, Amount: int64(cmd.Amount),
		Currency: cmd.Currency, Status: statusPending, CreatedAt: now, UpdatedAt: now}
	// The invoice's ID joins the step: after the key expired, a new
	// execution under the same key is a new invoice, not the old one.
	row.DownstreamKey = run.DownstreamKey("invoice:" + row.ID)
	if err := run.Phase(ctx, pointRecorded, func(tx *gorm.DB) (string, error) {
		return row.ID, tx.Create(row).Error
	}); err != nil {
		return postkeys.Response{}, err
	}
	return s.issue(ctx, run, row, false)
}

// reconcileCreate is the ReconcileFunc: the recovery worker (without the
// command) or a retry settles an invoice whose billing answer was lost.
func (s *Invoices) reconcileCreate(ctx context.Context, run *postkeys.Run[CreateCommand]) (postkeys.Response, error) {
	row, err := load[invoiceRow](ctx, s.engine, run.Tenant(), run.ResourceRef())
	if err != nil {
		return postkeys.Response{}, err
	}
	return s.issue(ctx, run, row, true)
}

// issue asks the billing service for the invoice unless the row already
// has its answer, and completes the record with the answer.
func (s *Invoices) issue(ctx context.Context, run *postkeys.Run[CreateCommand], row *invoiceRow, reconciling bool) (postkeys.Response, error) {
	if row.Status == statusPending {
		rec, err := s.call(ctx, run.RenewFor, BillingCall{Tenant: row.TenantID, Key: row.DownstreamKey, Kind: "invoice",
			Request: fmt.Sprintf("%s %d %s", row.Customer, row.Amount, row.Currency)}, reconciling)
		if err != nil {
			return postkeys.Response{}, err
		}
		row.BillingID, row.Status, row.UpdatedAt = &rec.ID, statusIssued, run.Now()
		return run.Complete(ctx, pointDone, func(tx *gorm.DB) (postkeys.Response, error) {
			if err := tx.Save(row).Error; err != nil {
				return postkeys.Response{}, err
			}
			return invoiceResponse(row)
		})
	}
	return invoiceResponse(row)
}

func invoiceResponse(row *invoiceRow) (postkeys.Response, error) {
	resp, err := postkeys.JSON(http.StatusCreated, row.invoice(), row.ID)
	resp.Header = http.Header{"Location": {"/v1/invoices/" + row.ID}}
	return resp, err
}

// runEmail is the RunFunc of POST /v1/invoices/{id}/emails: the invoice
// comes from the path (Run.PathParams). An unknown or pending invoice is
// answered before any phase, so nothing is stored.
func (s *Invoices) runEmail(ctx context.Context, run *postkeys.Run[EmailCommand]) (postkeys.Response, error) {
	if run.RecoveryPoint() != postkeys.PointStarted {
		return s.reconcileEmail(ctx, run)
	}
	cmd, _ := run.Command()
	inv, err := load[invoiceRow](ctx, s.engine, run.Tenant(), run.PathParams()["id"])
	if err != nil {
		return postkeys.Response{}, err
	}
	if inv.Status != statusIssued {
		return postkeys.Response{}, framework.Errorf(CodeInvoiceNotIssued, "invoice %s is not issued yet", inv.ID)
	}
	now := run.Now()
	row := &emailRow{TenantID: run.Tenant(), ID: newID("ie_"), InvoiceID: inv.ID, Recipient: cmd.To,
		Status: statusPending, CreatedAt: now, UpdatedAt: now}
	row.DownstreamKey = run.DownstreamKey("email:" + row.ID)
	if err := run.Phase(ctx, pointRecorded, func(tx *gorm.DB) (string, error) {
		return row.ID, tx.Create(row).Error
	}); err != nil {
		return postkeys.Response{}, err
	}
	return s.send(ctx, run, row, false)
}

// reconcileEmail settles an email whose billing answer was lost; the row
// names its invoice, so the path is not needed.
func (s *Invoices) reconcileEmail(ctx context.Context, run *postkeys.Run[EmailCommand]) (postkeys.Response, error) {
	row, err := load[emailRow](ctx, s.engine, run.Tenant(), run.ResourceRef())
	if err != nil {
		return postkeys.Response{}, err
	}
	return s.send(ctx, run, row, true)
}

func (s *Invoices) send(ctx context.Context, run *postkeys.Run[EmailCommand], row *emailRow, reconciling bool) (postkeys.Response, error) {
	if row.Status == statusPending {
		rec, err := s.call(ctx, run.RenewFor, BillingCall{Tenant: row.TenantID, Key: row.DownstreamKey, Kind: "email",
			Request: row.InvoiceID + " " + row.Recipient}, reconciling)
		if err != nil {
			return postkeys.Response{}, err
		}
		row.BillingID, row.Status, row.UpdatedAt = &rec.ID, statusSent, run.Now()
		return run.Complete(ctx, pointDone, func(tx *gorm.DB) (postkeys.Response, error) {
			if err := tx.Save(row).Error; err != nil {
				return postkeys.Response{}, err
			}
			return emailResponse(row)
		})
	}
	return emailResponse(row)
}

func emailResponse(row *emailRow) (postkeys.Response, error) {
	return postkeys.JSON(http.StatusCreated, Email{ID: row.ID, InvoiceID: row.InvoiceID, To: row.Recipient,
		BillingID: *row.BillingID, Status: row.Status, CreatedAt: row.CreatedAt.UTC()}, row.ID)
}

// call makes one call to the billing service. A reconcile asks first
// whether the key already names a record (the call may have happened
// with its answer lost) and calls only if not. The lease must cover the
// call (Run.RenewFor): an attempt that stalled past its lease gets
// postkeys.ErrFenced there and never calls. A lost answer is
// outcome_pending: the record stays unknown until a retry or the recovery
// worker reconciles it.
func (s *Invoices) call(ctx context.Context, renewFor func(context.Context, time.Duration) error, c BillingCall, reconciling bool) (BillingRecord, error) {
	if reconciling {
		rec, err := s.billing.Lookup(ctx, c.Tenant, c.Key)
		if !errors.Is(err, ErrBillingNotFound) {
			return rec, err
		}
	}
	if err := renewFor(ctx, billingTimeout); err != nil {
		return BillingRecord{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, billingTimeout)
	defer cancel()
	rec, err := s.billing.Do(callCtx, c)
	if errors.Is(err, ErrBillingTimeout) || errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		return BillingRecord{}, &framework.Error{Code: wire.CodeOutcomePending, Err: err,
			Detail: "the billing service did not answer in time; retry with the same key"}
	}
	return rec, err
}

// get answers GET /v1/invoices/:id with the tenant's invoice.
func (s *Invoices) get(c *gin.Context) {
	tenant, ok := server.Tenant(c, s.engine.Logger())
	if !ok {
		return
	}
	row, err := load[invoiceRow](c.Request.Context(), s.engine, tenant, c.Param("id"))
	if err != nil {
		s.engine.WriteProblem(c.Writer, c.Request, err)
		return
	}
	body, _ := json.Marshal(row.invoice())
	framework.WriteReply(c.Writer, framework.Reply{Status: http.StatusOK, Body: body})
}

// load reads the tenant's row id of T's table: not_found when there is
// none.
func load[T any](ctx context.Context, engine *framework.Engine, tenant, id string) (*T, error) {
	var rows []T
	if err := engine.DB().Gorm.WithContext(ctx).Where("tenant_id = ? AND id = ?", tenant, id).Limit(1).Find(&rows).Error; err != nil {
		return nil, engine.DB().Classify(err)
	}
	if len(rows) == 0 {
		return nil, framework.Errorf(wire.CodeNotFound, "%s does not exist", id)
	}
	return &rows[0], nil
}

func newID(prefix string) string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
