package postkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

// Mode says how an operation's work relates to its idempotency record.
type Mode int

const (
	// Local operations touch only this database: the claim, the business
	// writes of [Operation.ExecuteFunc] and the completion commit in one
	// transaction. A concurrent duplicate waits on the record's unique key
	// and replays the winner's response. No crash window exists.
	Local Mode = iota
	// Phased operations call something outside this database (a payment
	// provider). [Operation.RunFunc] commits its work in atomic phases
	// ([Run.Phase]), each recording a recovery point; the attempt holds a
	// lease, is fenced by a token that never repeats, and is resumed after a crash
	// by a retry or by the recovery worker.
	Phased
)

// KeyPolicy says whether an operation requires an idempotency key.
type KeyPolicy int

const (
	// KeyRequired answers 400 idempotency_key_missing to a request without
	// a key.
	KeyRequired KeyPolicy = iota
	// KeyOptional executes a request without a key as is, with nothing
	// stored: a retry of it executes again.
	KeyOptional
)

// PointStarted is the recovery point of a freshly claimed record: nothing
// has been committed yet, so an attempt that fails or crashes there has had
// no side effect and its key is released.
const PointStarted = "started"

// Request is what a local operation executes: the authenticated tenant, the
// validated command and the request's context.
type Request[Cmd any] struct {
	Tenant string
	// Key is the idempotency key, "" when the operation's key is optional
	// and the request had none.
	Key     string
	Command Cmd
	// PathParams are the route's path parameters, part of the
	// fingerprint. A phased operation reads them with [Run.PathParams].
	PathParams map[string]string
	Header     http.Header
	// Now is the engine's clock when the record was claimed: use it for
	// timestamps so that the stored response and the rows agree.
	Now time.Time
}

// Response is what an operation answers. It is stored (status, the headers
// of [Config.StoredHeaders], body) and replayed byte for byte, unless its
// status is 5xx: such a Response is never stored and counts as the
// operation's error (a local operation's writes roll back and its key is
// free; a phased attempt releases its key before its first phase, or
// leaves the record unknown after one). The client gets it as it is, with
// nothing replayed, unless the record is left unknown (then 409
// outcome_pending).
type Response struct {
	Status int
	// Header holds response headers; only those of Config.StoredHeaders are
	// sent and stored. Content-Type defaults to JSON.
	Header http.Header
	// Body is sent as is.
	Body []byte
	// ResourceRef names the resource the response describes (a transfer
	// ID): RenderFunc re-renders the body from it when the body is over
	// Config.MaxStoredBody, and RunFunc and ReconcileFunc find it again
	// through [Run.ResourceRef].
	ResourceRef string
}

// JSON returns a Response with v marshalled as its body.
func JSON(status int, v any, ref string) (Response, error) {
	body, err := json.Marshal(v)
	if err != nil {
		return Response{}, err
	}
	return Response{Status: status, Body: body, ResourceRef: ref}, nil
}

// Operation declares one POST operation over its command type Cmd, the
// typed request body with validate tags (and optionally
// [framework.Defaulter], [framework.Checker], [framework.Normalizer]).
type Operation[Cmd any] struct {
	// Name is the operation's name in fingerprints, records, metrics and
	// logs ("transfers.create"). It must be unique per adapter. Required.
	Name string
	// Mode is [Local] or [Phased]. Defaults to Local.
	Mode Mode
	// KeyPolicy is [KeyRequired] or [KeyOptional]. Defaults to KeyRequired.
	KeyPolicy KeyPolicy
	// SemanticHeaders names request headers that change the meaning of a
	// command (an API version); their values join the fingerprint.
	SemanticHeaders []string
	// Volatile lists dotted JSON paths of command fields left out of the
	// fingerprint.
	Volatile []string
	// RejectionCodes lists the problem codes of deterministic business
	// rejections (a payment's card_declined, a credit's insufficient_funds):
	// an error with one of them is stored as the record's outcome and
	// replayed byte for byte. Each must be registered on the engine
	// ([framework.Engine.RegisterCodes]) with a 4xx status and not be
	// retryable; the framework's own request-level codes (validation,
	// keys, authentication, 429) are refused. Local mode rolls back the
	// business writes of a rejected request. Any other error is not stored.
	// Defaults to none.
	RejectionCodes []wire.Code
	// Problems lists the other problem codes ExecuteFunc, RunFunc or
	// ReconcileFunc may return, which are answered but not stored: a
	// not_found for a path parameter that names no resource, a retryable
	// code of the application's own. The API description lists them with
	// RejectionCodes and the codes the framework answers itself
	// ([Endpoint.Describe]). Each must be registered on the engine.
	// Defaults to none.
	Problems []wire.Code
	// ExecuteFunc runs a Local operation inside the claim's transaction tx;
	// its writes commit together with the record. Required for Local.
	ExecuteFunc func(ctx context.Context, tx *gorm.DB, req Request[Cmd]) (Response, error)
	// RunFunc runs, or resumes from [Run.RecoveryPoint], a Phased operation.
	// Every local write goes through [Run.Phase]; every external call
	// carries a [Run.DownstreamKey] and is made after the first phase, so
	// that an attempt that dies before any phase committed has had no side
	// effect. Required for Phased.
	RunFunc func(ctx context.Context, run *Run[Cmd]) (Response, error)
	// ClaimInFirstPhase, for a Phased operation, claims a fresh key in the
	// transaction of RunFunc's first [Run.Phase] (or [Run.Complete]), before
	// that phase's writes, instead of in a transaction of its own: one
	// commit fewer per request, and a crash before the first phase leaves
	// no record behind. RunFunc then starts before the key is claimed, also
	// for a request whose key turns out to be held: before its first phase
	// it must do nothing that another request could see or that must not
	// happen twice (reading the command, deriving keys and IDs is fine), and
	// it must return [ErrFenced] from that phase as it is; the request is
	// then answered from the record, as after any claim that lost. A
	// RunFunc that returns or calls [Run.Renew] before any phase claims the
	// key then, in a transaction of its own. Defaults to false.
	ClaimInFirstPhase bool
	// ReconcileFunc settles a Phased record whose outcome is not known: an
	// attempt that failed after a side effect (state unknown) or one whose
	// lease ran out past its first recovery point. It runs without the
	// command when the recovery worker calls it ([Run.Command] reports
	// false) and must rebuild what it needs from the business rows
	// ([Run.ResourceRef]) and the provider (by [Run.DownstreamKey]). It
	// returns the response to store, a rejection, or an error, which leaves
	// the record unknown for a later try. Required for Phased.
	ReconcileFunc func(ctx context.Context, run *Run[Cmd]) (Response, error)
	// RenderFunc re-renders the body of a stored response that was over
	// Config.MaxStoredBody from the record (its ResourceRef). Defaults to
	// nil, and then a response over the cap is an internal error.
	RenderFunc func(ctx context.Context, db *gorm.DB, rec store.RecordRow) ([]byte, error)
}

// PathParams returns the route's path parameters ({"id": "inv_1"} for
// POST /v1/invoices/{id}/emails), which are part of the fingerprint: a
// retry with the same key and another ID is 422 idempotency_key_reuse.
// It returns nil when the recovery worker runs ReconcileFunc without a
// request (as [Run.Command] reports false then): what reconciliation needs
// of them, a phase records in the business rows. The map must not be
// modified.
func (r *Run[Cmd]) PathParams() map[string]string { return r.at.pathParams }

// operation is the untyped form the adapter works with.
type operation struct {
	name       string
	mode       Mode
	keyPolicy  KeyPolicy
	rejections map[wire.Code]bool
	problems   []wire.Code
	execute    func(ctx context.Context, tx *gorm.DB, at *attempt) (Response, error)
	run        func(ctx context.Context, at *attempt) (Response, error)
	reconcile  func(ctx context.Context, at *attempt) (Response, error)
	render     func(ctx context.Context, db *gorm.DB, rec store.RecordRow) ([]byte, error)
	// claimInFirstPhase: Operation.ClaimInFirstPhase.
	claimInFirstPhase bool
}

// declared returns the codes op declares (its RejectionCodes, then its
// Problems), as codes describes them. Register checked that each is
// registered.
func (op *operation) declared(codes *framework.Codes) []wire.CodeInfo {
	var out []wire.CodeInfo
	seen := map[wire.Code]bool{}
	for _, code := range append(slices.Sorted(maps.Keys(op.rejections)), op.problems...) {
		if info, ok := codes.Lookup(code); ok && !seen[code] {
			seen[code] = true
			out = append(out, info)
		}
	}
	return out
}

func (op *operation) isRejection(err error) bool {
	e, ok := framework.AsError(err)
	return ok && op.rejections[e.Code]
}

// Endpoint serves one registered operation.
type Endpoint[Cmd any] struct {
	a  *Adapter
	op *operation
	// front reads, binds and fingerprints its requests, with the cache of
	// the commands of bodies already replayed.
	front *framework.Front[Cmd]
}

// Name returns the operation's name.
func (e *Endpoint[Cmd]) Name() string { return e.op.name }

// Register validates op and adds it to the adapter: its handler serves
// requests and the recovery worker knows its records. Bad declarations fail
// here, never while serving.
func Register[Cmd any](a *Adapter, op Operation[Cmd]) (*Endpoint[Cmd], error) {
	if a == nil {
		return nil, errors.New("postkeys: Register needs an adapter")
	}
	if op.Name == "" || strings.ContainsAny(op.Name, " \t\n") {
		return nil, fmt.Errorf("postkeys: operation name %q is empty or has blanks", op.Name)
	}
	if op.KeyPolicy != KeyRequired && op.KeyPolicy != KeyOptional {
		return nil, fmt.Errorf("postkeys: operation %q has an unknown key policy", op.Name)
	}
	switch op.Mode {
	case Local:
		if op.ExecuteFunc == nil {
			return nil, fmt.Errorf("postkeys: local operation %q needs an ExecuteFunc", op.Name)
		}
		if op.RunFunc != nil || op.ReconcileFunc != nil || op.ClaimInFirstPhase {
			return nil, fmt.Errorf("postkeys: local operation %q must not set RunFunc, ReconcileFunc or ClaimInFirstPhase", op.Name)
		}
	case Phased:
		if op.RunFunc == nil || op.ReconcileFunc == nil {
			return nil, fmt.Errorf("postkeys: phased operation %q needs a RunFunc and a ReconcileFunc", op.Name)
		}
		if op.ExecuteFunc != nil {
			return nil, fmt.Errorf("postkeys: phased operation %q must not set ExecuteFunc", op.Name)
		}
	default:
		return nil, fmt.Errorf("postkeys: operation %q has an unknown mode", op.Name)
	}
	rejections := map[wire.Code]bool{}
	for _, code := range op.RejectionCodes {
		if err := storableRejection(a.engine.Codes(), code); err != nil {
			return nil, fmt.Errorf("postkeys: operation %q: %w", op.Name, err)
		}
		rejections[code] = true
	}
	for _, code := range op.Problems {
		if _, ok := a.engine.Codes().Lookup(code); !ok {
			return nil, fmt.Errorf("postkeys: operation %q: %w: %q (register it with Engine.RegisterCodes before declaring the operation)",
				op.Name, framework.ErrCodeUnregistered, code)
		}
	}
	in := &operation{
		name: op.Name, mode: op.Mode, keyPolicy: op.KeyPolicy,
		rejections: rejections, problems: append([]wire.Code(nil), op.Problems...), render: op.RenderFunc, claimInFirstPhase: op.ClaimInFirstPhase,
	}
	if fn := op.ExecuteFunc; fn != nil {
		in.execute = func(ctx context.Context, tx *gorm.DB, at *attempt) (Response, error) {
			cmd, _ := at.cmd.(Cmd)
			return fn(ctx, tx, Request[Cmd]{Tenant: at.id.Tenant, Key: at.id.Key, Command: cmd,
				PathParams: at.pathParams, Header: at.header, Now: at.claimedAt})
		}
	}
	if fn := op.RunFunc; fn != nil {
		in.run = func(ctx context.Context, at *attempt) (Response, error) { return fn(ctx, newRun[Cmd](at)) }
	}
	if fn := op.ReconcileFunc; fn != nil {
		in.reconcile = func(ctx context.Context, at *attempt) (Response, error) { return fn(ctx, newRun[Cmd](at)) }
	}
	if err := a.add(in); err != nil {
		return nil, err
	}
	front := framework.NewFront[Cmd](a.engine.Binder(), framework.FrontConfig{Operation: op.Name,
		SemanticHeaders: op.SemanticHeaders, Volatile: op.Volatile, ReplayCache: a.cfg.ReplayCache})
	return &Endpoint[Cmd]{a: a, op: in, front: front}, nil
}

// requestLevel reports whether code is a generic code that judges the
// request rather than decides the operation: those are never stored under a
// key (DESIGN §6).
func requestLevel(code wire.Code) bool {
	switch code {
	case wire.CodeMalformedJSON, wire.CodeValidationFailed, wire.CodeInvalidResourceID,
		wire.CodeIdempotencyKeyMissing, wire.CodeIdempotencyKeyInvalid, wire.CodeIdempotencyKeyReuse,
		wire.CodeUnauthenticated, wire.CodeMethodNotAllowed, wire.CodePayloadTooLarge,
		wire.CodeUnsupportedMediaType, wire.CodePreconditionFailed:
		return true
	}
	return false
}

// storableRejection reports whether code can be stored and replayed as a
// business rejection: registered, 4xx, final, and not a request-level code.
func storableRejection(codes *framework.Codes, code wire.Code) error {
	info, ok := codes.Lookup(code)
	switch {
	case !ok:
		return fmt.Errorf("%w: %q (register it with Engine.RegisterCodes before declaring the operation)", framework.ErrCodeUnregistered, code)
	case info.Status < 400 || info.Status >= 500, info.Retryable, requestLevel(code),
		info.Status == http.StatusUnauthorized, info.Status == http.StatusForbidden,
		info.Status == http.StatusProxyAuthRequired, info.Status == http.StatusTooManyRequests:
		return fmt.Errorf("%q (%d) is not a storable business rejection", code, info.Status)
	}
	return nil
}
