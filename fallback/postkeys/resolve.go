package postkeys

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"
)

// Outcome is the final answer an operator chooses for a record whose
// outcome is unknown.
type Outcome string

// The outcomes of [Resolve].
const (
	// OutcomeSucceeded: the operation happened (the operator found the
	// charge at the provider); the record answers a 2xx with a reference.
	OutcomeSucceeded Outcome = "succeeded"
	// OutcomeFailed: it did not happen, or was refused; the record answers
	// the problem of a registered code.
	OutcomeFailed Outcome = "failed"
)

// DefaultResolveLease is how long a resolution's takeover holds the record
// before the same transaction completes it ([ResolveParams.Lease]).
const DefaultResolveLease = 30 * time.Second

// ResolveParams are the arguments of [Resolve].
type ResolveParams struct {
	ID      store.RecordKey
	Outcome Outcome
	// Reference names what the operation produced (a charge ID): the
	// record's resource reference. Required for OutcomeSucceeded.
	Reference string
	// Status is the status a succeeded record answers. Defaults to 200;
	// it must be 2xx.
	Status int
	// Body is the JSON body a succeeded record answers. It must pass the
	// check every request body passes (Binder's CheckJSON: one JSON value,
	// valid UTF-8, no duplicate object keys, no NUL, nesting within the
	// bound), since clients parse the replay as they would any answer.
	// Defaults to {"reference":Reference}.
	Body []byte
	// Code is the problem code a failed record answers: registered in
	// Codes (a generic code, or one of the application's business codes),
	// final (not retryable, 4xx or 5xx) and not a code that judges a
	// request rather than an operation. Required for OutcomeFailed.
	Code wire.Code
	// Detail is the problem's detail. Defaults to none.
	Detail string
	// Codes is the registry Code is looked up in and rendered with: the
	// generic codes and those the record's operation declared, as its
	// service renders them. [Adapter.Resolve] defaults it to those of the
	// operation registered on the adapter; an operator's tool that is not
	// the service reads them with [PublishedCodes]. A code registered for
	// another operation does not belong here: a client of this one would
	// get an answer its API never gives. Defaults to the generic codes
	// only.
	Codes *framework.Codes
	// Actor and Reason are written to the audit row: who resolved the
	// record, and why. Required.
	Actor  string
	Reason string
	// TTL is the replay window of the resolved record: expires_at =
	// database clock + TTL. It must be at least Lease: a window shorter
	// than an attempt's lease lets the client's next retry find the key
	// free and run the operation again. Defaults to
	// [framework.DefaultRetention]'s ReplayWindow.
	TTL time.Duration
	// Lease is how long the takeover holds the record before the
	// completion in its transaction. Defaults to [DefaultResolveLease].
	Lease time.Duration
	// MaxBody caps Body. Defaults to [DefaultMaxStoredBody].
	MaxBody int
	// Binder checks Body as a request body is checked. Defaults to a
	// binder with the framework's default bounds (framework.NewBinder).
	Binder *framework.Binder
}

// Resolution is what [Resolve] stored.
type Resolution struct {
	// From is the state the record was in: unknown, or in_progress past
	// its lease.
	From store.RecordState
	// Fence is the fencing token of the resolution's takeover.
	Fence  int64
	Status int
	Header http.Header
	Body   []byte
}

// Resolve settles, by an operator's decision, a record of db whose
// outcome is unknown (or that is in progress past its lease): the
// client's next retry with the key replays the answer chosen here. It
// takes the record over with the recovery worker's fenced takeover (one
// statement, on the database clock, with a new fencing token), completes
// it and writes the audit row ([store.Records.Audit]) in one transaction,
// so that of a resolution and a recovery worker (or a retry) racing for
// the record exactly one wins; the other is fenced off.
//
// It returns [ErrRecordNotFound], [ErrLeaseHeld] while an attempt's lease
// is live, [ErrNotResolvable] for a completed record, [ErrFenced] when
// another attempt took the record first, and [ErrInvalidResolution];
// in each case nothing was written. Database errors are classified by db
// (store.ErrUnavailable, store.ErrLockTimeout).
func Resolve(ctx context.Context, db *store.DB, p ResolveParams) (Resolution, error) {
	if db == nil {
		return Resolution{}, errors.New("postkeys: Resolve needs a database")
	}
	return resolve(ctx, db, db.Driver.Records(), p)
}

// resolve is [Resolve] with the statements of records.
func resolve(ctx context.Context, db *store.DB, records store.Records, p ResolveParams) (Resolution, error) {
	stored, err := p.response()
	if err != nil {
		return Resolution{}, err
	}
	rec, found, err := records.Get(ctx, db.Gorm, &store.RecordGetParams{ID: p.ID})
	switch {
	case err != nil:
		return Resolution{}, db.Classify(err)
	case !found:
		return Resolution{}, ErrRecordNotFound
	case rec.State == store.RecordCompleted:
		return Resolution{}, ErrNotResolvable
	case rec.State == store.RecordInProgress && !rec.LeaseExpired:
		return Resolution{}, fmt.Errorf("%w (until %s, attempt %d)", ErrLeaseHeld, rec.LockedUntil.Format(time.RFC3339), rec.Attempt)
	}
	outcome, err := stored.recordOutcome(p.TTL)
	if err != nil {
		return Resolution{}, err
	}
	res := Resolution{From: rec.State, Status: stored.status, Header: stored.header, Body: stored.body}
	err = db.Write(ctx, func(tx *gorm.DB) error {
		c, ok, err := records.Takeover(ctx, tx, &store.RecordTakeoverParams{ID: p.ID, Fence: rec.Fence, From: rec.State, Lease: p.Lease})
		if err != nil {
			return err
		}
		if !ok {
			return ErrFenced
		}
		res.Fence = c.Fence
		if ok, err = records.Complete(ctx, tx, &store.RecordCompleteParams{ID: p.ID, Fence: c.Fence, RecordOutcome: outcome}); err != nil {
			return err
		}
		if !ok {
			return ErrFenced
		}
		return records.Audit(ctx, tx, &store.RecordAuditParams{Tenant: p.ID.Tenant, Operation: p.ID.Operation,
			KeyHash: telemetry.KeyHash(p.ID.Key), Fence: c.Fence, From: rec.State, Outcome: string(p.Outcome),
			Status: stored.status, Reference: p.Reference, ErrorCode: stored.errorCode, Actor: p.Actor, Reason: p.Reason})
	})
	if err != nil {
		return Resolution{}, err
	}
	return res, nil
}

// Resolve is [Resolve] on the adapter's database, with
// the codes of the record's operation (the generic codes and those it
// declared, as the engine renders them; the generic codes alone for an
// operation the adapter does not know), the engine's replay window and
// the adapter's lease and body cap as defaults.
func (a *Adapter) Resolve(ctx context.Context, p ResolveParams) (Resolution, error) {
	if p.Codes == nil {
		p.Codes = framework.NewCodes()
		if op := a.operation(p.ID.Operation); op != nil {
			if err := p.Codes.Register(op.declared(a.engine.Codes())...); err != nil {
				return Resolution{}, err
			}
		}
	}
	if p.TTL == 0 {
		p.TTL = a.engine.Retention().ReplayWindow
	}
	if p.Lease == 0 {
		p.Lease = a.cfg.LeaseDuration
	}
	if p.MaxBody == 0 {
		p.MaxBody = a.cfg.MaxStoredBody
	}
	if p.Binder == nil {
		p.Binder = a.engine.Binder()
	}
	return resolve(ctx, a.db, a.records, p)
}

// PublishOperations writes what each operation registered on the adapter
// declares (its RejectionCodes and Problems, as the engine describes
// them) to the database (idempotency_operations, one row per operation;
// the last service to publish an operation wins), where an operator's
// tool that is not the service reads it ([PublishedCodes]; the retrysafe
// command's "records resolve"). [Adapter.Start] calls it, and again at
// every recovery round until it succeeds; a service that runs no workers
// calls it once at start-up, after its Register calls.
func (a *Adapter) PublishOperations(ctx context.Context) error {
	a.mu.RLock()
	ops := make([]*operation, 0, len(a.ops))
	for _, op := range a.ops {
		ops = append(ops, op)
	}
	a.mu.RUnlock()
	return a.db.Write(ctx, func(tx *gorm.DB) error {
		for _, op := range ops {
			row, err := operationRow(op.name, op.declared(a.engine.Codes()))
			if err != nil {
				return err
			}
			if err := a.records.PutOperation(ctx, tx, row); err != nil {
				return err
			}
		}
		return nil
	})
}

// PublishedCodes returns the codes a record of operation may be resolved
// with by a tool that is not the service ([ResolveParams].Codes): the
// generic codes and those the operation declared, as the last service to
// publish it rendered them ([Adapter.PublishOperations]). published is
// false when no service published the operation: then the generic codes
// alone.
func PublishedCodes(ctx context.Context, db *store.DB, operation string) (codes *framework.Codes, published bool, err error) {
	codes = framework.NewCodes()
	row, found, err := db.Driver.Records().GetOperation(ctx, db.Gorm, operation)
	if err != nil {
		return nil, false, db.Classify(err)
	}
	if !found {
		return codes, false, nil
	}
	declared, err := operationCodes(&row)
	if err != nil {
		return nil, false, err
	}
	if err := codes.Register(declared...); err != nil {
		return nil, false, fmt.Errorf("postkeys: the codes published for operation %q: %w", operation, err)
	}
	return codes, true, nil
}

// response checks p and returns the response it stores, defaults applied.
func (p *ResolveParams) response() (storedResponse, error) {
	invalid := func(format string, args ...any) (storedResponse, error) {
		return storedResponse{}, fmt.Errorf("%w: %s", ErrInvalidResolution, fmt.Sprintf(format, args...))
	}
	if p.ID.Tenant == "" || p.ID.Operation == "" || p.ID.Key == "" {
		return invalid("a tenant, an operation and a key are required")
	}
	if strings.TrimSpace(p.Actor) == "" || strings.TrimSpace(p.Reason) == "" {
		return invalid("an actor and a reason are required for the audit trail")
	}
	if p.TTL < 0 || p.Lease < 0 || p.MaxBody < 0 {
		return invalid("TTL, Lease and MaxBody must not be negative")
	}
	if p.TTL == 0 {
		p.TTL = framework.DefaultRetention().ReplayWindow
	}
	if p.Lease == 0 {
		p.Lease = DefaultResolveLease
	}
	if p.MaxBody == 0 {
		p.MaxBody = DefaultMaxStoredBody
	}
	if p.TTL < p.Lease {
		return invalid("the replay window (%v) is shorter than the lease (%v): the client's next retry could run the operation again", p.TTL, p.Lease)
	}
	if p.Binder == nil {
		var err error
		if p.Binder, err = framework.NewBinder(framework.BinderConfig{}); err != nil {
			return storedResponse{}, err
		}
	}
	switch p.Outcome {
	case OutcomeSucceeded:
		if p.Reference == "" {
			return invalid("a succeeded outcome needs a reference")
		}
		if p.Code != "" {
			return invalid("a succeeded outcome has no code")
		}
		if p.Status == 0 {
			p.Status = http.StatusOK
		}
		if p.Status < 200 || p.Status > 299 {
			return invalid("a succeeded outcome answers 2xx, not %d", p.Status)
		}
		body := p.Body
		if body == nil {
			body, _ = json.Marshal(map[string]string{"reference": p.Reference})
		}
		if len(body) > p.MaxBody {
			return invalid("the body is %d bytes, over the %d stored", len(body), p.MaxBody)
		}
		if err := p.Binder.CheckJSON(body); err != nil {
			return invalid("the body of a succeeded outcome is refused as a request's would be: %s", describeProblem(err))
		}
		header := http.Header{}
		header.Set(wire.HeaderContentType, "application/json; charset=utf-8")
		return storedResponse{status: p.Status, header: header, body: body, ref: p.Reference}, nil
	case OutcomeFailed:
		if p.Code == "" {
			return invalid("a failed outcome needs a code")
		}
		if p.Body != nil || p.Status != 0 {
			return invalid("a failed outcome answers its code's problem: no body or status of its own")
		}
		if _, ok := p.Codes.Lookup(p.Code); !ok {
			return invalid("code %q is neither a generic code nor one that operation %q declared", p.Code, p.ID.Operation)
		}
		if err := storableRejection(p.Codes, p.Code); err != nil {
			return invalid("code %q is not a final answer of an operation (a final 4xx that does not judge the request): %v", p.Code, err)
		}
		status, h, body := p.Codes.RenderProblem(&framework.Error{Code: p.Code, Detail: p.Detail})
		header := http.Header{}
		header.Set(wire.HeaderContentType, h.Get(wire.HeaderContentType))
		return storedResponse{status: status, header: header, body: body, ref: p.Reference, errorCode: string(p.Code)}, nil
	}
	return invalid("outcome %q is neither %q nor %q", p.Outcome, OutcomeSucceeded, OutcomeFailed)
}

// describeProblem spells a problem error with its fields, for an operator.
func describeProblem(err error) string {
	e := framework.ErrorFor(err)
	msg := string(e.Code) + ": " + e.Detail
	for _, f := range e.Fields {
		msg += fmt.Sprintf(" (%s: %s)", cmp.Or(f.Field, "body"), f.Reason)
	}
	return msg
}
