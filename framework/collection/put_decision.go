package collection

import (
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"
)

// putAction is what a PUT does next, as decided by [decidePut].
type putAction int

const (
	// actInsert: no row; insert (INSERT … ON CONFLICT DO NOTHING).
	actInsert putAction = iota
	// actReply: answer with the current row, writing nothing (replay or
	// convergence; see putDecision.Status, Replayed and Outcome).
	actReply
	// actReplyCurrent: like actReply, but the row's business columns were
	// written by another request than this one (If-None-Match: * replaying a
	// create after a later replace): render them from the database.
	actReplyCurrent
	// actLock: a replace is decided on an unlocked read; read the row again
	// under a row lock and decide again.
	actLock
	// actReplace: the row is locked and may be replaced; version + 1.
	actReplace
	// actPurge: the row is a tombstone past its retention; delete it, then
	// insert.
	actPurge
	// actRefuse: answer putDecision.Err, writing nothing.
	actRefuse
)

// putState is what a PUT knows when it decides: the request and, when a row
// was read, the row.
type putState struct {
	// Request.
	Fingerprint     string
	IfMatch         string
	IfNoneMatchStar bool
	// KeyReuse answers a differing If-None-Match: * with 422
	// idempotency_key_reuse instead of 412 (the legacy POST route).
	KeyReuse bool
	Mode     Mode
	// Row; Exists is false when no row was found.
	Exists bool
	Row    System
	// Locked is true when Row was read under a row lock; Purged when this
	// request already deleted an expired tombstone of the ID.
	Locked, Purged bool
	// DBNow is the database clock as of the request's first read of the
	// row, never a process clock: the row's times were stamped by the
	// database clock too, so that processes whose clocks disagree judge
	// the replay window and the tombstone retention alike (DESIGN §3).
	DBNow     time.Time
	Retention framework.Retention

	// Patch marks a PATCH, whose Fingerprint is that of the command its
	// result would be as a PUT body: it acts on an existing resource only
	// (no row: 404; a tombstone: 410; If-None-Match: * on a live row: 412)
	// and is never a create's replay.
	Patch bool
	// Guard is the replace guard's answer for the locked Row
	// ([Resource.ReplaceGuardFunc], for example resource_locked); nil when
	// a replace is allowed or the row is not locked.
	Guard error
}

// putDecision is the outcome of [decidePut].
type putDecision struct {
	Action   putAction
	Status   int
	Replayed bool
	Outcome  string
	Err      error
}

// decidePut decides what a PUT does with the row it read (DESIGN §5.1). It
// is pure: the engine reads, calls it, and carries the decision out.
func decidePut(s putState) putDecision {
	if !s.Exists {
		if s.Patch {
			return refuse(framework.Errorf(wire.CodeNotFound, "no such resource; a PATCH never creates one"))
		}
		if s.IfMatch != "" {
			return refuse(framework.Errorf(wire.CodePreconditionFailed, "If-Match given but the resource does not exist"))
		}
		return putDecision{Action: actInsert}
	}
	r := &s.Row
	if r.DeletedAt != nil && s.Patch {
		return refuse(framework.Errorf(wire.CodeResourceDeleted, "the resource was deleted; a PATCH cannot bring it back"))
	}
	if r.DeletedAt != nil {
		if s.Purged || s.Retention.TombstoneLive(*r.DeletedAt, s.DBNow) {
			return refuse(framework.Errorf(wire.CodeResourceDeleted, "the resource was deleted; its ID cannot be used again"))
		}
		return putDecision{Action: actPurge}
	}
	switch {
	// A PATCH never creates: If-None-Match: * is false on a resource that
	// exists, whatever the patch (RFC 9110 §13.1.2).
	case s.IfNoneMatchStar && s.Patch:
		return refuse(framework.Errorf(wire.CodePreconditionFailed, "If-None-Match: * given but the resource exists, and a PATCH never creates one"))
	case s.IfNoneMatchStar:
		if r.CreateFingerprint != s.Fingerprint {
			if s.KeyReuse {
				return refuse(framework.Errorf(wire.CodeIdempotencyKeyReuse, "this key was used with a different request"))
			}
			return refuse(framework.Errorf(wire.CodePreconditionFailed, "If-None-Match: * given but the resource exists with a different creating request"))
		}
		d := putDecision{Action: actReply, Status: http.StatusCreated, Replayed: true, Outcome: telemetry.OutcomeReplayed}
		if r.Fingerprint != s.Fingerprint {
			d.Action = actReplyCurrent
		}
		return d
	// A stale If-Match whose write would leave the resource as it is
	// converges below: it is the retry of a write whose answer was lost,
	// and its goal is reached.
	case s.IfMatch != "" && !etagMatches(s.IfMatch, r.ETag()) && r.Fingerprint != s.Fingerprint:
		return refuse(framework.Errorf(wire.CodePreconditionFailed, "If-Match does not match the current ETag %s", r.ETag()))
	case r.Fingerprint == s.Fingerprint:
		switch {
		// A conditional write or a PATCH created nothing, so it is never
		// answered 201; the current version holds what its command wrote:
		// a replay, or (If-Match stale) a convergence.
		case s.IfMatch != "" || s.Patch:
			d := putDecision{Action: actReply, Status: http.StatusOK, Replayed: true, Outcome: telemetry.OutcomeReplayed}
			if s.IfMatch != "" && !etagMatches(s.IfMatch, r.ETag()) {
				d.Outcome = telemetry.OutcomeConverged
			}
			return d
		// The body is still the creating one (a status change bumps the
		// version, not the body): a retry of the create within the window
		// is its replay, 201.
		case r.Fingerprint == r.CreateFingerprint && s.Retention.InReplayWindow(r.CreatedAt, s.DBNow):
			return putDecision{Action: actReply, Status: http.StatusCreated, Replayed: true, Outcome: telemetry.OutcomeReplayed}
		case s.Retention.InReplayWindow(r.UpdatedAt, s.DBNow):
			return putDecision{Action: actReply, Status: http.StatusOK, Replayed: true, Outcome: telemetry.OutcomeReplayed}
		default:
			return putDecision{Action: actReply, Status: http.StatusOK, Outcome: telemetry.OutcomeConverged}
		}
	case s.Mode == CreateOnly:
		return refuse(framework.Errorf(wire.CodeIdempotencyKeyReuse, "the resource exists with a different body and cannot be replaced"))
	case !s.Locked:
		return putDecision{Action: actLock}
	case s.Guard != nil:
		return refuse(s.Guard)
	}
	return putDecision{Action: actReplace, Status: http.StatusOK, Outcome: telemetry.OutcomeExecuted}
}

func refuse(err error) putDecision { return putDecision{Action: actRefuse, Err: err} }
