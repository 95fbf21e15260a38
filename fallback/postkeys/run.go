package postkeys

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net/http"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/failpoint"
)

// attempt is one execution of an operation under one fencing token: the
// request's, a retry's that took the record over, or the recovery worker's.
type attempt struct {
	a  *Adapter
	op *operation
	id store.RecordKey
	// fingerprint is the stored form ("v1:…").
	fingerprint string
	// number is the attempt's number in the record's life (logs, Run.Attempt);
	// fence is its fencing token, which every write names. Both are 0 when
	// the request had no key and nothing is recorded.
	number   int64
	fence    int64
	recorded bool
	// seed stands for the key in downstream keys: the key, or a random
	// value when the request had none (every such request is new).
	seed       string
	point      string
	ref        string
	cmd        any
	hasCmd     bool
	header     http.Header
	pathParams map[string]string
	claimedAt  time.Time
	start      time.Time
	// unclaimed is set while an operation with ClaimInFirstPhase runs
	// before its first phase: the key is claimed in that phase's
	// transaction (or, when RunFunc returns or renews first, in one of its
	// own); version is the fingerprint version the claim stores.
	unclaimed bool
	version   int
	// held is the record the deferred claim found holding the key: the
	// request is answered from it, as after any claim that lost.
	held *store.RecordRow
	// leaseSent and leaseSentClock are the process's monotonic clock and
	// the engine's clock taken before the last statement that set this
	// attempt's lease (claim, takeover, phase, renewal) was sent; zero
	// when the attempt holds no lease. See leaseCovers.
	leaseSent      time.Time
	leaseSentClock time.Time
	// done is the outcome [Run.Complete] stored with the last phase.
	done *outcome
}

// renewMargin is what [Run.RenewFor] asks of a lease beyond the step it
// guards before it skips the renewal: room for the database's and the
// process's clocks running at slightly different rates over one lease,
// SQLite's millisecond lease times, and the scheduling between the check
// and the call.
const renewMargin = time.Second

// sendingLeaseWrite returns the clocks to record in markLease once a
// statement that sets the lease, sent after this call, has committed.
func (at *attempt) sendingLeaseWrite() (mono, clock time.Time) {
	return time.Now(), at.a.engine.Now()
}

// markLease records that the attempt's lease was set by a statement sent
// after mono and clock (from sendingLeaseWrite).
func (at *attempt) markLease(mono, clock time.Time) {
	at.leaseSent, at.leaseSentClock = mono, clock
}

// leaseCovers reports whether the attempt's lease certainly lasts need +
// renewMargin more, judged without a round trip. The database set the
// lease to (its clock when the statement ran) + LeaseDuration, and the
// statement ran after leaseSent, so the lease ends no earlier than
// leaseSent + LeaseDuration, provided the process's clock has counted
// everything that happened since, pauses included. The time elapsed is
// the monotonic time since leaseSent (which a wall clock stepping back
// cannot shrink) plus however far the engine's clock moved meanwhile. In
// production both count the same time, so the check is stricter than it
// needs to be; with a test clock, the second is the shift tests apply to
// the database clock too (storetest.ShiftRecordClock), which the
// monotonic clock does not see.
func (at *attempt) leaseCovers(need time.Duration) bool {
	if at.leaseSent.IsZero() || need < 0 {
		return false
	}
	elapsed := time.Since(at.leaseSent) + max(0, at.a.engine.Now().Sub(at.leaseSentClock))
	return at.a.cfg.LeaseDuration-elapsed >= need+renewMargin
}

// failPoint reaches the fail point point of the attempt: the Func its
// context carries, if any, may pause it there or abandon it
// (internal/failpoint; only the framework's tests and the demo's fault
// flags set one).
func (at *attempt) failPoint(ctx context.Context, point string) error {
	return failpoint.Reach(ctx, at.op.name, point)
}

// phase commits one phase: fn's writes and the record's new recovery point
// in one transaction, which also claims the key when the attempt has not
// yet (ClaimInFirstPhase). With final (Run.Complete), fn's response or
// business rejection is stored in that transaction too, and the attempt is
// done; when it cannot be stored there (the request has no key, or the
// response is not storable) the phase commits without it and finish
// stores the outcome, or fails, as after any RunFunc. The fail points come
// before and after that transaction, never inside it:
// failpoint.BeforeComplete before a final one, failpoint.AfterClaim after
// one that claimed, then failpoint.AfterPhase.
func (at *attempt) phase(ctx context.Context, point string, fn func(tx *gorm.DB) (Response, error), final bool) (resp Response, fnErr error, err error) {
	// A claim made here keeps its span beside the phase's, under the
	// request's, as a claim of its own would.
	claimCtx := ctx
	ctx, span := telemetry.StartSpan(ctx, "postkeys.phase", attribute.String("retrysafe.recovery_point", point))
	defer func() { telemetry.EndSpan(span, err) }()
	if point == "" || point == PointStarted {
		return Response{}, nil, fmt.Errorf("postkeys: %q is not a recovery point a phase can reach", point)
	}
	a := at.a
	merge := final && at.recorded
	if merge {
		if err := at.failPoint(ctx, failpoint.BeforeComplete); err != nil {
			return Response{}, nil, err
		}
	}
	var (
		claim    store.RecordClaim
		claimed  bool
		held     store.RecordRow
		isHeld   bool
		stored   storedResponse
		complete bool
	)
	mono, clock := at.sendingLeaseWrite()
	err = a.db.Write(ctx, func(tx *gorm.DB) error {
		claimed, isHeld, complete = false, false, false
		fence := at.fence
		if at.unclaimed {
			var err error
			if claim, claimed, held, err = a.claimTx(claimCtx, tx, at, at.version); err != nil {
				return err
			}
			if !claimed {
				// Someone holds the key: nothing of this attempt is written.
				isHeld = true
				return nil
			}
			fence = claim.Fence
		}
		resp, fnErr = Response{}, nil
		if fn != nil {
			resp, fnErr = fn(tx)
			if fnErr != nil && !(final && at.op.isRejection(fnErr)) {
				return fnErr
			}
		}
		if !at.recorded {
			return nil
		}
		// The record's update comes last: a stalled attempt's business
		// writes roll back with it when its fence is no longer the
		// record's or its lease has ended on the database clock.
		var ok bool
		if merge {
			var serr error
			if fnErr != nil {
				stored = a.rejection(fnErr)
			} else {
				stored, serr = a.storable(at.op, resp, "")
			}
			if complete = serr == nil; complete {
				p, err := a.completeParams(at, stored)
				if err != nil {
					return err
				}
				p.Fence, p.Point = fence, point
				if ok, err = a.records.Complete(ctx, tx, p); err != nil {
					return err
				}
			}
		}
		if !complete {
			var err error
			ok, err = a.records.Advance(ctx, tx, &store.RecordAdvanceParams{ID: at.id, Fence: fence, Point: point,
				Ref: resp.ResourceRef, Lease: a.cfg.LeaseDuration})
			if err != nil {
				return err
			}
		}
		if !ok {
			return ErrFenced
		}
		return nil
	})
	if err != nil {
		return Response{}, nil, err
	}
	if isHeld {
		at.held = &held
		return Response{}, nil, ErrFenced
	}
	if claimed {
		at.unclaimed = false
		at.number, at.fence = claim.Attempt, claim.Fence
		a.logTransition(ctx, at, "claimed", store.RecordInProgress, 0, false)
	}
	at.point = point
	if resp.ResourceRef != "" {
		at.ref = resp.ResourceRef
	}
	if complete {
		at.leaseSent, at.leaseSentClock = time.Time{}, time.Time{}
		out := outcome{resp: stored, body: resp.Body, metric: telemetry.OutcomeExecuted}
		if fnErr != nil {
			out = outcome{resp: stored, body: stored.body, metric: telemetry.OutcomeRejected}
		}
		at.done = &out
		a.logTransition(ctx, at, "phase", store.RecordInProgress, 0, false)
		a.logTransition(ctx, at, "completed", store.RecordCompleted, stored.status, false)
	} else {
		if at.recorded {
			at.markLease(mono, clock)
		}
		a.logTransition(ctx, at, "phase", store.RecordInProgress, 0, false)
	}
	if claimed {
		if err := at.failPoint(ctx, failpoint.AfterClaim); err != nil {
			return Response{}, nil, err
		}
	}
	if err := at.failPoint(ctx, failpoint.AfterPhase+point); err != nil {
		return Response{}, nil, err
	}
	return resp, fnErr, nil
}

// claimOwn claims the key of an attempt that deferred its claim
// (ClaimInFirstPhase) in a transaction of its own, because RunFunc
// renewed or returned before its first phase. When the key is held, the
// record is kept in at.held and ErrFenced returned.
func (at *attempt) claimOwn(ctx context.Context) error {
	var (
		c       store.RecordClaim
		claimed bool
		rec     store.RecordRow
	)
	mono, clock := at.sendingLeaseWrite()
	err := at.a.db.Write(ctx, func(tx *gorm.DB) error {
		var err error
		c, claimed, rec, err = at.a.claimTx(ctx, tx, at, at.version)
		return err
	})
	if err != nil {
		return err
	}
	if !claimed {
		at.held = &rec
		return ErrFenced
	}
	at.unclaimed = false
	at.number, at.fence = c.Attempt, c.Fence
	at.markLease(mono, clock)
	at.a.logTransition(ctx, at, "claimed", store.RecordInProgress, 0, false)
	return at.failPoint(ctx, failpoint.AfterClaim)
}

func (at *attempt) renew(ctx context.Context) error {
	if !at.recorded {
		return nil
	}
	if at.unclaimed {
		// A renewal before the first phase: claim first; the claim's
		// lease is as fresh as a renewal's.
		return at.claimOwn(ctx)
	}
	// In a transaction of its own, so that the lock timeout bounds a wait
	// on the record's row.
	var ok bool
	mono, clock := at.sendingLeaseWrite()
	err := at.a.db.Write(ctx, func(tx *gorm.DB) error {
		var err error
		ok, err = at.a.records.Renew(ctx, tx, &store.RecordRenewParams{ID: at.id, Fence: at.fence, Lease: at.a.cfg.LeaseDuration})
		return err
	})
	if err != nil {
		return err
	}
	if !ok {
		return ErrFenced
	}
	at.markLease(mono, clock)
	return nil
}

// renewFor renews the lease unless leaseCovers(need): then there is no
// round trip at all.
func (at *attempt) renewFor(ctx context.Context, need time.Duration) error {
	if !at.recorded {
		return nil
	}
	if !at.unclaimed && at.leaseCovers(need) {
		return nil
	}
	return at.renew(ctx)
}

// DownstreamKey derives the idempotency key of one step's call to another
// system from (tenant, operation, key, step): every attempt of one record
// sends the same key for the same step, so a resumed attempt asks again
// without doing the work twice. The result is 64 hex digits.
func DownstreamKey(tenant, operation, key, step string) string {
	h := sha256.New()
	h.Write([]byte("retrysafe/postkeys/downstream/v1"))
	for _, part := range []string{tenant, operation, key, step} {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(part)))
		h.Write(n[:])
		h.Write([]byte(part))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Run is one attempt of a [Phased] operation, handed to its RunFunc and
// ReconcileFunc.
type Run[Cmd any] struct {
	at  *attempt
	cmd Cmd
}

func newRun[Cmd any](at *attempt) *Run[Cmd] {
	r := &Run[Cmd]{at: at}
	if at.hasCmd {
		r.cmd, _ = at.cmd.(Cmd)
	}
	return r
}

// Command returns the validated command, and false when the attempt has
// none: the recovery worker runs ReconcileFunc without a request.
func (r *Run[Cmd]) Command() (Cmd, bool) { return r.cmd, r.at.hasCmd }

// Tenant returns the tenant the record belongs to.
func (r *Run[Cmd]) Tenant() string { return r.at.id.Tenant }

// Key returns the idempotency key ("" when the key was optional and absent).
func (r *Run[Cmd]) Key() string { return r.at.id.Key }

// Operation returns the operation's name.
func (r *Run[Cmd]) Operation() string { return r.at.id.Operation }

// Attempt returns this attempt's number in the record's life: 1 for the
// claim, +1 for every takeover. It starts at 1 again after a release;
// the fencing token that guards the attempt's writes never does. It is 0
// before the first phase of an operation with
// [Operation.ClaimInFirstPhase], which has not claimed its key yet.
func (r *Run[Cmd]) Attempt() int64 { return r.at.number }

// RecoveryPoint returns the last committed recovery point: [PointStarted]
// for a fresh record, the point of the last [Run.Phase] otherwise. A
// resumed attempt continues from it.
func (r *Run[Cmd]) RecoveryPoint() string { return r.at.point }

// ResourceRef returns the resource reference recorded by the last phase
// that set one ("" if none did).
func (r *Run[Cmd]) ResourceRef() string { return r.at.ref }

// Now returns the engine's clock, for the timestamps of business rows.
// Leases are kept on the database clock, never on this one.
func (r *Run[Cmd]) Now() time.Time { return r.at.a.engine.Now() }

// Phase commits one atomic phase: fn's writes on tx and the new recovery
// point (and, when fn returns a non-empty ref, the resource reference) in
// one transaction, which also renews the lease. The record's update applies
// only while this attempt still owns the record (its fence is current and
// its lease live on the database clock); otherwise the whole phase rolls
// back and Phase returns [ErrFenced]. fn may be nil.
//
// For an operation with [Operation.ClaimInFirstPhase], the first Phase of
// a fresh attempt also claims the key, in the same transaction and before
// fn runs; when another request holds the key, fn does not run and Phase
// returns [ErrFenced], which RunFunc returns as it is (the request is then
// answered from that record).
func (r *Run[Cmd]) Phase(ctx context.Context, point string, fn func(tx *gorm.DB) (ref string, err error)) error {
	var wrapped func(tx *gorm.DB) (Response, error)
	if fn != nil {
		wrapped = func(tx *gorm.DB) (Response, error) {
			ref, err := fn(tx)
			return Response{ResourceRef: ref}, err
		}
	}
	_, _, err := r.at.phase(ctx, point, wrapped, false)
	return err
}

// Complete commits the last phase together with the outcome: fn's writes on
// tx, the recovery point and what fn answers (a [Response], or a business
// rejection of [Operation.RejectionCodes], whose writes are kept) are
// stored in one transaction, one commit instead of a phase's and the
// completion's. RunFunc (or ReconcileFunc) returns what Complete returns.
// Any other error from fn rolls the phase back and is returned, as from
// [Run.Phase]; so is [ErrFenced]. A crash before the commit leaves the
// record at the previous recovery point, as before any phase.
func (r *Run[Cmd]) Complete(ctx context.Context, point string, fn func(tx *gorm.DB) (Response, error)) (Response, error) {
	resp, fnErr, err := r.at.phase(ctx, point, fn, true)
	if err != nil {
		return Response{}, err
	}
	return resp, fnErr
}

// Renew extends the lease, from the database clock, before a step that
// could outlast it: call it right before every call to another system (a
// provider). It returns [ErrFenced] when the attempt no longer owns the
// record (taken over, released, or its lease already ended): then the
// caller must not make the call and must return the error.
func (r *Run[Cmd]) Renew(ctx context.Context) error { return r.at.renew(ctx) }

// RenewFor is [Run.Renew] before a step bounded by step (a provider call
// and its timeout), with no round trip when the lease certainly lasts step
// plus a margin (one second) more: the lease this attempt's last claim,
// takeover, phase or renewal set runs from the database clock when that
// statement ran, which was after the process sent it; so the process
// counts, on its monotonic clock, from before the send, and skips only
// when what is left cannot be less than what the step needs. An attempt
// that paused past that point renews, and gets [ErrFenced] if its lease
// has ended, exactly as with Renew. The guarantee assumes that the
// process's monotonic clock counts the pause (a stopped process's does; a
// suspended virtual machine's may not); use Renew where that is in doubt.
func (r *Run[Cmd]) RenewFor(ctx context.Context, step time.Duration) error {
	return r.at.renewFor(ctx, step)
}

// DownstreamKey returns the key to send with step's call to another system:
// [DownstreamKey] of this record, so that every attempt sends the same one.
func (r *Run[Cmd]) DownstreamKey(step string) string {
	return DownstreamKey(r.at.id.Tenant, r.at.id.Operation, r.at.seed, step)
}
