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

	"github.com/retrysafe/retrysafe/framework"
)

// attempt is one execution of an operation under one fencing token: the
// request's, a retry's that took the record over, or the recovery worker's.
type attempt struct {
	a  *Adapter
	op *operation
	id RecordID
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
}

// failPoint calls Config.FailPointFunc at point.
func (at *attempt) failPoint(ctx context.Context, point string) error {
	fn := at.a.cfg.FailPointFunc
	if fn == nil {
		return nil
	}
	if err := fn(ctx, at.op.name, point); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrAbandoned, point, err)
	}
	return nil
}

func (at *attempt) phase(ctx context.Context, point string, fn func(tx *gorm.DB) (string, error)) (err error) {
	ctx, span := framework.StartSpan(ctx, "postkeys.phase", attribute.String("retrysafe.recovery_point", point))
	defer func() { framework.EndSpan(span, err) }()
	if point == "" || point == PointStarted {
		return fmt.Errorf("postkeys: %q is not a recovery point a phase can reach", point)
	}
	var ref string
	err = at.a.db.Write(ctx, func(tx *gorm.DB) error {
		if fn != nil {
			var err error
			if ref, err = fn(tx); err != nil {
				return err
			}
		}
		if !at.recorded {
			return nil
		}
		// The record's update comes last: a stalled attempt's business
		// writes roll back with it when its fence is no longer the
		// record's or its lease has ended on the database clock.
		ok, err := at.a.records.Advance(ctx, tx, AdvanceParams{ID: at.id, Fence: at.fence, Point: point, Ref: ref,
			Lease: at.a.cfg.LeaseDuration})
		if err != nil {
			return err
		}
		if !ok {
			return ErrFenced
		}
		return nil
	})
	if err != nil {
		return err
	}
	at.point = point
	if ref != "" {
		at.ref = ref
	}
	at.a.logTransition(ctx, at, "phase", StateInProgress, 0, false)
	return at.failPoint(ctx, FailPointAfterPhase+point)
}

func (at *attempt) renew(ctx context.Context) error {
	if !at.recorded {
		return nil
	}
	// In a transaction of its own, so that the lock timeout bounds a wait
	// on the record's row.
	var ok bool
	err := at.a.db.Write(ctx, func(tx *gorm.DB) error {
		var err error
		ok, err = at.a.records.Renew(ctx, tx, RenewParams{ID: at.id, Fence: at.fence, Lease: at.a.cfg.LeaseDuration})
		return err
	})
	if err != nil {
		return err
	}
	if !ok {
		return ErrFenced
	}
	return nil
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
// the fencing token that guards the attempt's writes never does.
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
func (r *Run[Cmd]) Phase(ctx context.Context, point string, fn func(tx *gorm.DB) (ref string, err error)) error {
	return r.at.phase(ctx, point, fn)
}

// Renew extends the lease, from the database clock, before a step that
// could outlast it: call it right before every call to another system (a
// provider). It returns [ErrFenced] when the attempt no longer owns the
// record (taken over, released, or its lease already ended): then the
// caller must not make the call and must return the error.
func (r *Run[Cmd]) Renew(ctx context.Context) error { return r.at.renew(ctx) }

// DownstreamKey returns the key to send with step's call to another system:
// [DownstreamKey] of this record, so that every attempt sends the same one.
func (r *Run[Cmd]) DownstreamKey(step string) string {
	return DownstreamKey(r.at.id.Tenant, r.at.id.Operation, r.at.seed, step)
}

// FailPoint names a point where tests may simulate a crash (for example
// between a provider's answer and the phase that records it). It returns
// nil unless [Config.FailPointFunc] fails it; then it returns an error
// wrapping [ErrAbandoned], which the caller must return as it is.
func (r *Run[Cmd]) FailPoint(ctx context.Context, name string) error {
	return r.at.failPoint(ctx, name)
}
