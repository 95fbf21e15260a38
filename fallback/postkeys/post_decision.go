package postkeys

import (
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

// postAction is what a request with a key does next, as decided by
// [decidePost].
type postAction int

const (
	// postClaim: no live record (none, or an expired one): claim the key,
	// then execute. A local request claims in the transaction of its
	// business writes, before them.
	postClaim postAction = iota
	// postReplay: answer with the completed record's stored response.
	postReplay
	// postResume: the record is in progress past its lease: take it over
	// and run on from its recovery point.
	postResume
	// postReconcile: the record's outcome is unknown: take it over and
	// reconcile.
	postReconcile
	// postWait: another attempt holds the record under a live lease; look
	// again after postDecision.Pause.
	postWait
	// postRefuse: answer postDecision.Err, writing nothing.
	postRefuse
)

// postState is what a request knows when it decides: the request and, when
// one was read (or found by a claim that lost), the record of its key.
type postState struct {
	Mode Mode
	// Fingerprint is the request's, in the stored form.
	Fingerprint string
	// Found is false when the key has no record; Record is the record
	// otherwise, with its Expired and LeaseExpired flags as of the
	// database clock.
	Found  bool
	Record store.RecordRow
	// WaitLeft is what is left of Config.InProgressWait for this request;
	// PollInterval is Config.PollInterval.
	WaitLeft, PollInterval time.Duration
}

// postDecision is the outcome of [decidePost].
type postDecision struct {
	Action postAction
	// Pause is how long to wait before looking again (postWait).
	Pause time.Duration
	Err   error
}

// decidePost decides what a POST with a key does with the record of its
// key (DESIGN §6). It is pure: the adapter reads or claims, calls it, and
// carries the decision out, the takeovers of the phased mode with the
// record's fence and state.
func decidePost(s postState) postDecision {
	r := &s.Record
	switch {
	case !s.Found, r.Expired:
		return postDecision{Action: postClaim}
	case r.Fingerprint != s.Fingerprint:
		return refusePost(errKeyReuse())
	case r.State == store.RecordCompleted:
		return postDecision{Action: postReplay}
	case s.Mode == Local && r.State == store.RecordUnknown:
		return refusePost(errOutcomePending())
	case s.Mode == Local:
		return refusePost(errInProgress())
	case r.State == store.RecordUnknown:
		return postDecision{Action: postReconcile}
	case r.LeaseExpired:
		return postDecision{Action: postResume}
	case s.WaitLeft <= 0:
		return refusePost(errInProgress())
	}
	return postDecision{Action: postWait, Pause: min(s.WaitLeft, s.PollInterval)}
}

func refusePost(err error) postDecision { return postDecision{Action: postRefuse, Err: err} }

func errKeyReuse() error {
	return framework.Errorf(wire.CodeIdempotencyKeyReuse, "this idempotency key was used with a different request")
}

func errInProgress() error {
	return framework.Errorf(wire.CodeRequestInProgress, "a request with this idempotency key is being executed; retry shortly with the same key")
}

func errOutcomePending() error {
	return framework.Errorf(wire.CodeOutcomePending, "the outcome of an earlier attempt with this key is being reconciled; retry later with the same key")
}
