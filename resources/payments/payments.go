package payments

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/telemetry"
)

// Operation is the name of payment creation in idempotency records,
// fingerprints, metrics and logs.
const Operation = "payments.create"

// Recovery points of a payment, in order. [postkeys.PointStarted] comes
// before them: nothing committed, no side effect.
const (
	// PointCreated: the pending payment row is committed; the provider may
	// be called (with the payment's downstream key) from here on.
	PointCreated = "payment_created"
	// PointCharged: the provider's answer (charge ID, status) is committed
	// on the payment row, with the stored response (postkeys.Run.Complete).
	// A record left here without its outcome (one that could not be
	// stored with the phase) is settled by answering from the row.
	PointCharged = "charged"
)

// FailPointAfterCharge is the fail point between the provider's answer and
// the phase that records it: the crash window where the card is charged
// and this database does not know yet. The fault tests and the demo's
// -pause-at flag stop an attempt there (internal/failpoint); nothing else
// does.
const FailPointAfterCharge = "after_charge"

// DefaultProviderTimeout bounds one provider call when [Config] sets none.
const DefaultProviderTimeout = 2 * time.Second

// Config configures [New]. The zero value is ready to use.
type Config struct {
	// ProviderTimeout bounds one call to the provider; a call that takes
	// longer leaves the payment's outcome unknown (409 outcome_pending) until
	// it is reconciled through the downstream key. Defaults to 2s.
	ProviderTimeout time.Duration
	// BasePath is where the payments are mounted, for Location headers.
	// Defaults to "/v1/payments".
	BasePath string
}

// Payments serves payment creation on the POST fallback in phased mode and
// reads of payments.
type Payments struct {
	engine   *framework.Engine
	provider Provider
	endpoint *postkeys.Endpoint[Command]
	cfg      Config
}

// New registers the payments.create operation on the adapter a and returns
// the resource. The adapter must run on the engine e.
func New(e *framework.Engine, a *postkeys.Adapter, p Provider, cfg Config) (*Payments, error) {
	if e == nil || a == nil || p == nil {
		return nil, errors.New("payments: New needs an engine, an adapter and a provider")
	}
	if cfg.ProviderTimeout < 0 {
		return nil, errors.New("payments: ProviderTimeout must not be negative")
	}
	if cfg.ProviderTimeout == 0 {
		cfg.ProviderTimeout = DefaultProviderTimeout
	}
	if cfg.BasePath == "" {
		cfg.BasePath = "/v1/payments"
	}
	if err := registerValidations(e.Binder().Validator()); err != nil {
		return nil, err
	}
	if err := e.RegisterCodes(Codes()...); err != nil {
		return nil, err
	}
	pay := &Payments{engine: e, provider: p, cfg: cfg}
	ep, err := postkeys.Register(a, postkeys.Operation[Command]{
		Name:      Operation,
		Mode:      postkeys.Phased,
		KeyPolicy: postkeys.KeyRequired,
		// run does nothing before its first phase but build the pending
		// row in memory, so the key is claimed in that phase's transaction.
		ClaimInFirstPhase: true,
		RejectionCodes:    []wire.Code{CodeCardDeclined},
		RunFunc:           pay.run,
		ReconcileFunc:     pay.reconcile,
		RenderFunc:        pay.render,
	})
	if err != nil {
		return nil, err
	}
	pay.endpoint = ep
	return pay, nil
}

// Mount registers POST /payments and GET /payments/:id on g, which must
// already run [server.RequireAuth].
func (p *Payments) Mount(g gin.IRouter) {
	g.POST("/payments", p.endpoint.Handle)
	g.GET("/payments/:id", p.handleGet)
}

// Get returns the tenant's payment id, or a not_found error.
func (p *Payments) Get(ctx context.Context, tenant, id string) (Payment, error) {
	r, err := loadPayment(ctx, p.engine.DB().Gorm, tenant, id)
	if err != nil {
		return Payment{}, p.engine.DB().Classify(err)
	}
	return r.payment(), nil
}

func (p *Payments) handleGet(c *gin.Context) {
	tenant, ok := server.Tenant(c, p.engine.Logger())
	if !ok {
		return
	}
	pay, err := p.Get(c.Request.Context(), tenant, c.Param("id"))
	if err != nil {
		p.engine.WriteProblem(c.Writer, c.Request, err)
		return
	}
	body, err := json.Marshal(pay)
	if err != nil {
		p.engine.WriteProblem(c.Writer, c.Request, err)
		return
	}
	framework.WriteReply(c.Writer, framework.Reply{Status: http.StatusOK, Body: body})
}

// run is the RunFunc: create the pending payment (with the claim of the
// key, ClaimInFirstPhase), charge it, record the answer with the response
// (Run.Complete). A resumed attempt continues from its recovery point.
func (p *Payments) run(ctx context.Context, run *postkeys.Run[Command]) (postkeys.Response, error) {
	var row *paymentRow
	switch run.RecoveryPoint() {
	case postkeys.PointStarted:
		cmd, ok := run.Command()
		if !ok {
			return postkeys.Response{}, errors.New("payments: a fresh attempt has no command")
		}
		row = p.newPayment(run, cmd)
		if err := run.Phase(ctx, PointCreated, func(tx *gorm.DB) (string, error) {
			return row.ID, insertPayment(ctx, tx, row)
		}); err != nil {
			return postkeys.Response{}, err
		}
	case PointCreated, PointCharged:
		var err error
		if row, err = p.load(ctx, run); err != nil {
			return postkeys.Response{}, err
		}
	default:
		return postkeys.Response{}, fmt.Errorf("payments: unknown recovery point %q", run.RecoveryPoint())
	}
	if row.Status == StatusPending {
		ch, err := p.charge(ctx, run, row)
		if err != nil {
			return postkeys.Response{}, err
		}
		if err := failpoint.Reach(ctx, Operation, FailPointAfterCharge); err != nil {
			return postkeys.Response{}, err
		}
		return p.record(ctx, run, row, ch)
	}
	return p.respond(row)
}

// reconcile is the ReconcileFunc: it settles a payment whose charge may or
// may not have happened by asking the provider for the payment's downstream
// key. A charge the provider does not know is requested again with that key,
// which the provider deduplicates, so the card is charged at most once.
func (p *Payments) reconcile(ctx context.Context, run *postkeys.Run[Command]) (postkeys.Response, error) {
	if run.ResourceRef() == "" {
		return postkeys.Response{}, errors.New("payments: a record past its first phase has no payment reference")
	}
	row, err := p.load(ctx, run)
	if err != nil {
		return postkeys.Response{}, err
	}
	if row.Status == StatusPending {
		ch, err := p.provider.Lookup(ctx, row.TenantID, row.DownstreamKey)
		if errors.Is(err, ErrChargeNotFound) {
			ch, err = p.charge(ctx, run, row)
		}
		if err != nil {
			return postkeys.Response{}, err
		}
		return p.record(ctx, run, row, ch)
	}
	return p.respond(row)
}

// render is the RenderFunc: the stored body of a payment, from its row.
func (p *Payments) render(ctx context.Context, db *gorm.DB, rec store.RecordRow) ([]byte, error) {
	row, err := loadPayment(ctx, db, rec.ID.Tenant, rec.ResourceRef)
	if err != nil {
		return nil, err
	}
	return json.Marshal(row.payment())
}

func (p *Payments) newPayment(run *postkeys.Run[Command], cmd Command) *paymentRow {
	id := newPaymentID()
	now := run.Now()
	return &paymentRow{
		TenantID: run.Tenant(), ID: id, Amount: int64(cmd.Amount), Currency: cmd.Currency, Customer: cmd.Customer,
		Description: cmd.Description, PaymentMethod: cmd.PaymentMethod, Status: StatusPending,
		// The payment ID joins the step: after the key expires, a new
		// execution under the same key is a new charge, not the old one.
		DownstreamKey: run.DownstreamKey("charge:" + id),
		CreatedAt:     now, UpdatedAt: now,
	}
}

func (p *Payments) load(ctx context.Context, run *postkeys.Run[Command]) (*paymentRow, error) {
	row, err := loadPayment(ctx, p.engine.DB().Gorm, run.Tenant(), run.ResourceRef())
	if err != nil {
		return nil, p.engine.DB().Classify(err)
	}
	return row, nil
}

// charge calls the provider with the payment's downstream key, bounded by
// the provider timeout. It first makes sure the attempt's lease covers the
// call (Run.RenewFor: no round trip when the phase just before set it): an
// attempt that stalled past its lease (and was taken over, released or
// simply outlived) gets postkeys.ErrFenced there and never calls the
// provider.
func (p *Payments) charge(ctx context.Context, run *postkeys.Run[Command], row *paymentRow) (_ Charge, err error) {
	ctx, span := telemetry.StartSpan(ctx, "payments.provider.charge")
	defer func() { telemetry.EndSpan(span, err) }()
	if err := run.RenewFor(ctx, p.cfg.ProviderTimeout); err != nil {
		return Charge{}, err
	}
	callCtx, cancel := context.WithTimeout(ctx, p.cfg.ProviderTimeout)
	defer cancel()
	ch, err := p.provider.Charge(callCtx, row.chargeRequest())
	if err != nil && ctx.Err() != nil {
		// The attempt's own deadline (the request's) ran out during the
		// call, before the provider timeout: say so, so that an operator
		// looks at the provider. Nothing more can be recorded in time; the
		// record is settled by a retry or the recovery worker.
		return Charge{}, &framework.Error{Code: wire.CodeUnavailable,
			Detail: "the deadline ran out during the payment provider call; retry with the same key",
			Err:    fmt.Errorf("payments: charge %s: %w during the provider call", row.ID, context.Cause(ctx))}
	}
	if errors.Is(err, ErrProviderTimeout) || errors.Is(callCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil {
		p.engine.Logger().LogAttrs(ctx, slog.LevelWarn, "payment provider timeout",
			slog.String("tenant", row.TenantID), slog.String("payment", row.ID), slog.Duration("timeout", p.cfg.ProviderTimeout))
		return Charge{}, &framework.Error{Code: wire.CodeOutcomePending,
			Detail: "the payment provider did not answer in time; the payment is being reconciled, retry with the same key",
			Err:    err}
	}
	if err != nil {
		return Charge{}, fmt.Errorf("payments: charge %s: %w", row.ID, err)
	}
	return ch, nil
}

// record commits the provider's answer on the payment row, its outbox
// event, the PointCharged recovery point and the stored response (201 or
// the card_declined rejection) in one transaction (Run.Complete), and
// returns that outcome.
func (p *Payments) record(ctx context.Context, run *postkeys.Run[Command], row *paymentRow, ch Charge) (postkeys.Response, error) {
	row.applyCharge(ch, run.Now())
	return run.Complete(ctx, PointCharged, func(tx *gorm.DB) (postkeys.Response, error) {
		if err := savePayment(ctx, tx, row); err != nil {
			return postkeys.Response{}, err
		}
		if err := emitOutcome(ctx, tx, row); err != nil {
			return postkeys.Response{}, err
		}
		return p.respond(row)
	})
}

// respond builds the outcome of a recorded payment: 201 with the payment, or
// the card_declined rejection that is stored and replayed.
func (p *Payments) respond(row *paymentRow) (postkeys.Response, error) {
	switch row.Status {
	case StatusSucceeded:
		resp, err := postkeys.JSON(http.StatusCreated, row.payment(), row.ID)
		if err != nil {
			return postkeys.Response{}, err
		}
		resp.Header = http.Header{"Location": {p.cfg.BasePath + "/" + row.ID}}
		return resp, nil
	case StatusFailed:
		return postkeys.Response{}, framework.Errorf(CodeCardDeclined, "the card was declined (payment %s)", row.ID)
	}
	return postkeys.Response{}, fmt.Errorf("payments: payment %s is still %s", row.ID, row.Status)
}
