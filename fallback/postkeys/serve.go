package postkeys

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
)

// outcome is what a request is answered with.
type outcome struct {
	resp storedResponse
	// body is the body to send: the stored one, or the full or re-rendered
	// one when the stored body was over the cap.
	body     []byte
	replayed bool
	metric   string
}

// maxDecisions bounds the claim / look / take-over loop of one request; every
// turn of it follows a change of the record made by someone else.
const maxDecisions = 64

func (a *Adapter) fail(c *gin.Context, op *operation, err error) {
	key, _, _ := framework.IdempotencyKey(c.Request.Header)
	a.engine.WriteFailure(c.Writer, c.Request, "post", op.name, key, err)
}

// Handle is the gin handler of the operation. Mount it on a group that
// runs [server.RequireAuth]: g.POST("/transfers", ep.Handle).
//
// The whole HTTP flow of an operation: the key, then the request front
// (the body bound and fingerprinted, or a kept command for a retry of
// bytes already replayed: [framework.Front.Serve]), then the record, then
// the reply.
func (e *Endpoint[Cmd]) Handle(c *gin.Context) {
	req, ok := e.a.begin(c, e.op)
	if !ok {
		return
	}
	reply := func(cmd Cmd, fingerprint string) bool { return req.reply(cmd, fingerprint) }
	run := func(cmd Cmd, fingerprint string) bool { return req.run(cmd, fingerprint) }
	if err := e.front.Serve(c.Request, req.target, reply, run); err != nil {
		e.a.fail(c, e.op, err)
	}
}

// request is one request of an operation, as the request front hands its
// command and fingerprint on.
type request struct {
	a       *Adapter
	c       *gin.Context
	op      *operation
	id      store.RecordKey
	present bool // the request has a key
	params  map[string]string
	start   time.Time
	target  framework.Target
}

// begin reads the tenant and the key of a request, or answers it and
// reports false.
func (a *Adapter) begin(c *gin.Context, op *operation) (request, bool) {
	start := time.Now()
	tenant, ok := server.Tenant(c, a.logger)
	if !ok {
		return request{}, false
	}
	key, present, err := framework.IdempotencyKey(c.Request.Header)
	if err == nil && !present && op.keyPolicy == KeyRequired {
		err = framework.Errorf(wire.CodeIdempotencyKeyMissing, "this operation requires an Idempotency-Key header")
	}
	if err != nil {
		a.fail(c, op, err)
		return request{}, false
	}
	if present {
		c.Writer.Header().Set(wire.HeaderIdempotencyKey, key)
	}
	params := make(map[string]string, len(c.Params))
	for _, p := range c.Params {
		params[p.Key] = p.Value
	}
	return request{a: a, c: c, op: op, id: store.RecordKey{Tenant: tenant, Operation: op.name, Key: key}, present: present, params: params, start: start,
		target: framework.Target{Tenant: tenant, PathParams: params, Header: c.Request.Header, Replayable: present}}, true
}

// reply answers a retry of bytes already replayed from its key's record
// when that is a completed one of this request, and reports whether it
// did.
func (r *request) reply(cmd any, fingerprint string) bool {
	ctx := r.c.Request.Context()
	at := r.a.newAttempt(r.c, r.op, r.id, fingerprint, cmd, r.params, r.start)
	out, replayed, err := r.a.replayFromReplica(ctx, r.op, at)
	if err == nil && !replayed {
		out, replayed, err = r.a.replayCompleted(ctx, r.op, at)
	}
	if err == nil && !replayed {
		return false
	}
	r.a.answer(r.c, r.op, r.id.Key, out, err)
	return true
}

// run serves the request, its record first, answers it and reports
// whether the answer replays an earlier execution.
func (r *request) run(cmd any, fingerprint string) bool {
	a, op, ctx := r.a, r.op, r.c.Request.Context()
	at := a.newAttempt(r.c, op, r.id, fingerprint, cmd, r.params, r.start)
	at.recorded = r.present
	var (
		out      outcome
		replayed bool
		err      error
	)
	if r.present {
		out, replayed, err = a.replayFromReplica(ctx, op, at)
	}
	switch {
	case err != nil || replayed:
	case !r.present:
		at.seed = uuid.NewString()
		out, err = a.serveUnrecorded(ctx, op, at)
	case op.mode == Local:
		out, err = a.serveLocal(ctx, op, at, framework.FingerprintVersion)
	default:
		out, err = a.servePhased(ctx, op, at, framework.FingerprintVersion)
	}
	a.answer(r.c, op, r.id.Key, out, err)
	return err == nil && out.replayed
}

// newAttempt is the attempt of a request with the key of id, whose
// command and fingerprint are known.
func (a *Adapter) newAttempt(c *gin.Context, op *operation, id store.RecordKey, fingerprint string, cmd any, params map[string]string, start time.Time) *attempt {
	return &attempt{a: a, op: op, id: id, fingerprint: fingerprint,
		recorded: true, seed: id.Key, cmd: cmd, hasCmd: true, header: c.Request.Header,
		pathParams: params, point: PointStarted, start: start}
}

// replayCompleted answers a request with a kept command from its key's
// record on the primary when the read-first of its mode would replay it
// (a completed record of this request); replayed is false otherwise.
func (a *Adapter) replayCompleted(ctx context.Context, op *operation, at *attempt) (_ outcome, replayed bool, _ error) {
	rec, found, err := a.records.Get(ctx, a.db.Gorm, &store.RecordGetParams{ID: at.id})
	if err != nil {
		return outcome{}, true, a.db.Classify(err)
	}
	if !found {
		return outcome{}, false, nil
	}
	var d postDecision
	if op.mode == Local {
		d = decidePost(postState{Mode: Local, Fingerprint: at.fingerprint, Found: true, Record: rec})
	} else {
		d = a.decidePhased(at, rec, true, time.Now().Add(a.cfg.InProgressWait))
	}
	if d.Action != postReplay {
		return outcome{}, false, nil
	}
	out, err := a.replay(ctx, a.db.Gorm.WithContext(ctx), op, at, rec)
	return out, true, err
}

// answer writes the outcome of a request, or its error: an operation's
// 5xx response (a *serverError) as the operation made it, unstored.
func (a *Adapter) answer(c *gin.Context, op *operation, key string, out outcome, err error) {
	if err != nil {
		var se *serverError
		if _, problem := framework.AsError(err); problem || !errors.As(err, &se) {
			a.fail(c, op, err)
			return
		}
		out = outcome{resp: se.resp, body: se.resp.body, metric: telemetry.OutcomeError}
	}
	a.engine.Metrics().Requests.WithLabelValues("post", op.name, out.metric).Inc()
	telemetry.TraceOutcome(c.Request.Context(), "post", op.name, out.metric, key)
	framework.WriteReply(c.Writer, framework.Reply{Status: out.resp.status, Body: out.body,
		Header: out.resp.header, Replayed: out.replayed, Key: key})
}

// serveUnrecorded executes a request without a key (the key is optional):
// nothing is stored, nothing is replayed.
func (a *Adapter) serveUnrecorded(ctx context.Context, op *operation, at *attempt) (outcome, error) {
	at.claimedAt = a.engine.Now()
	if op.mode == Phased {
		ctx, cancel := server.Detach(ctx, a.cfg.LeaseDuration)
		defer cancel()
		resp, err := op.run(ctx, at)
		return a.finish(ctx, op, at, resp, err, false)
	}
	var out outcome
	err := a.db.WriteRetrying(ctx, func(tx *gorm.DB) error {
		resp, err := op.execute(ctx, tx.WithContext(ctx), at)
		if err != nil {
			return err
		}
		// A 5xx response rolls the transaction back, as an error does.
		stored, err := a.storable(op, resp, "")
		out = outcome{resp: stored, body: resp.Body, metric: telemetry.OutcomeExecuted}
		return err
	})
	return out, err
}

// replicaMargin is how far from the end of its window a record read on a
// replica must be for the replica to answer its replay: the primary's
// janitor deletes a record past expires_at on the primary's clock, and a
// key reused after that has a new record the replica may not have seen.
const replicaMargin = time.Minute

// replayFromReplica answers a replay from the replica's copy of the key's
// record ([store.DB.Replica]) when that copy is final: completed, for this
// request, and at least replicaMargin from the end of its window. A
// completed record never changes, so the primary holds the same. With no
// replica, a failing one or any other finding, replayed is false and the
// primary decides as if the replica had not been asked.
func (a *Adapter) replayFromReplica(ctx context.Context, op *operation, at *attempt) (_ outcome, replayed bool, _ error) {
	var (
		rec   store.RecordRow
		found bool
	)
	err := a.db.ReadReplica(ctx, func(ctx context.Context, r *gorm.DB) (err error) {
		rec, found, err = a.records.Get(ctx, r, &store.RecordGetParams{ID: at.id})
		return err
	})
	if err != nil || !found || rec.State != store.RecordCompleted || rec.Fingerprint != at.fingerprint || rec.Expired ||
		!rec.ExpiresAt.After(a.engine.Now().Add(replicaMargin)) {
		return outcome{}, false, nil
	}
	// A truncated response is rendered from the resource: the primary's.
	out, err := a.replay(ctx, a.db.Gorm.WithContext(ctx), op, at, rec)
	return out, err == nil, err
}

// serveLocal runs a Local operation. The record is read first, outside
// any transaction: a key seen before (a replay, a reuse with another body)
// is answered from that one read. Anything else (no record, an expired
// one) takes the claim path (serveLocalClaimed).
func (a *Adapter) serveLocal(ctx context.Context, op *operation, at *attempt, version int) (outcome, error) {
	rec, found, err := a.records.Get(ctx, a.db.Gorm, &store.RecordGetParams{ID: at.id})
	if err != nil {
		return outcome{}, a.db.Classify(err)
	}
	d := decidePost(postState{Mode: Local, Fingerprint: at.fingerprint, Found: found, Record: rec})
	if d.Action != postClaim {
		return a.answerExisting(ctx, a.db.Gorm, op, at, rec, d)
	}
	return a.serveLocalClaimed(ctx, op, at, version)
}

// serveLocalClaimed runs a Local operation on the claim path: claim,
// business writes and completion in one transaction, so there is no crash
// window. The claim is the transaction's first statement: a concurrent
// duplicate waits on the key inside its own claim statement, before any
// of the operation's code runs, until the winner commits (then it
// replays) or rolls back (then it claims and executes); a wait past the
// store's lock timeout is 409 request_in_progress.
func (a *Adapter) serveLocalClaimed(ctx context.Context, op *operation, at *attempt, version int) (outcome, error) {
	var (
		out      outcome
		executed bool
	)
	err := a.db.WriteRetrying(ctx, func(tx *gorm.DB) error {
		executed = false
		tx = tx.WithContext(ctx)
		c, claimed, held, err := a.claimTx(ctx, tx, at, version)
		if err != nil {
			return err
		}
		if !claimed {
			d := decidePost(postState{Mode: Local, Fingerprint: at.fingerprint, Found: true, Record: held})
			out, err = a.answerExisting(ctx, tx, op, at, held, d)
			return err
		}
		at.number, at.fence, at.claimedAt = c.Attempt, c.Fence, a.engine.Now()
		var stored storedResponse
		if out, stored, err = a.executeLocal(ctx, tx, op, at); err != nil {
			return err
		}
		p, err := a.completeParams(at, stored)
		if err != nil {
			return err
		}
		ok, err := a.records.Complete(ctx, tx, p)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("postkeys: the record lost its claim inside the claim's transaction")
		}
		executed = true
		return nil
	})
	if err != nil {
		return outcome{}, err
	}
	if executed {
		a.logTransition(ctx, at, "claimed", store.RecordInProgress, 0, false)
		a.logTransition(ctx, at, "completed", store.RecordCompleted, out.resp.status, false)
	}
	return out, nil
}

// executeLocal runs a Local operation's business writes on tx and returns
// the outcome to store: its response, or a business rejection, whose
// writes are rolled back to a savepoint taken before them (the rejection
// binds the key; the writes before it do not happen).
func (a *Adapter) executeLocal(ctx context.Context, tx *gorm.DB, op *operation, at *attempt) (outcome, storedResponse, error) {
	const savepoint = "postkeys_execute"
	if len(op.rejections) > 0 {
		if err := tx.SavePoint(savepoint).Error; err != nil {
			return outcome{}, storedResponse{}, err
		}
	}
	resp, err := op.execute(ctx, tx, at)
	var (
		out    outcome
		stored storedResponse
	)
	switch {
	case err == nil:
		if stored, err = a.storable(op, resp, ""); err != nil {
			return outcome{}, storedResponse{}, err
		}
		out = outcome{resp: stored, body: resp.Body, metric: telemetry.OutcomeExecuted}
	case op.isRejection(err):
		if err := tx.RollbackTo(savepoint).Error; err != nil {
			return outcome{}, storedResponse{}, err
		}
		stored = a.rejection(err)
		out = outcome{resp: stored, body: stored.body, metric: telemetry.OutcomeRejected}
	default:
		return outcome{}, storedResponse{}, err
	}
	return out, stored, nil
}

// claimTx claims the key inside tx. A key nobody holds is taken by
// [store.Records.Insert], which neither locks nor writes when the key is
// held; the record found instead is read plainly, so a replay writes
// nothing. An expired (or meanwhile released) record is reclaimed by the
// one statement of [store.Records.Reclaim]. When the key is held, held is
// the live record.
func (a *Adapter) claimTx(ctx context.Context, tx *gorm.DB, at *attempt, version int) (c store.RecordClaim, claimed bool, held store.RecordRow, err error) {
	ctx, span := telemetry.StartSpan(ctx, "postkeys.claim", telemetry.AttrOperation.String(at.id.Operation))
	defer func() { span.SetAttributes(attribute.Bool("retrysafe.claimed", claimed)); telemetry.EndSpan(span, err) }()
	p := &store.RecordClaimParams{ID: at.id, Fingerprint: at.fingerprint, FingerprintVersion: version,
		Point: PointStarted, Lease: a.cfg.LeaseDuration, TTL: a.engine.Retention().ReplayWindow}
	if c, claimed, err = a.records.Insert(ctx, tx, p); err != nil || claimed {
		return c, claimed, store.RecordRow{}, err
	}
	get := &store.RecordGetParams{ID: at.id}
	rec, found, err := a.records.Get(ctx, tx, get)
	if err != nil || found && !rec.Expired {
		return store.RecordClaim{}, false, rec, err
	}
	if c, claimed, err = a.records.Reclaim(ctx, tx, p); err != nil || claimed {
		return c, claimed, store.RecordRow{}, err
	}
	if rec, found, err = a.records.Get(ctx, tx, get); err == nil && !found {
		err = errors.New("postkeys: the record vanished inside the claim's transaction")
	}
	return store.RecordClaim{}, false, rec, err
}

// completeParams is the completion of at with the outcome s.
func (a *Adapter) completeParams(at *attempt, s storedResponse) (*store.RecordCompleteParams, error) {
	o, err := s.recordOutcome(a.engine.Retention().ReplayWindow)
	if err != nil {
		return nil, err
	}
	return &store.RecordCompleteParams{ID: at.id, Fence: at.fence, RecordOutcome: o}, nil
}

// answerExisting answers a Local request from the live record rec it did
// not claim, as d (decidePost) says: the stored response, or the refusal
// (422 for a different request, 409 for an unfinished one).
func (a *Adapter) answerExisting(ctx context.Context, db *gorm.DB, op *operation, at *attempt, rec store.RecordRow, d postDecision) (outcome, error) {
	switch d.Action {
	case postReplay:
		return a.replay(ctx, db, op, at, rec)
	case postRefuse:
		return outcome{}, d.Err
	}
	// A claim that lost found a record it may not claim either: someone
	// holds the key.
	return outcome{}, errInProgress()
}

// replay answers with a completed record's stored response.
func (a *Adapter) replay(ctx context.Context, db *gorm.DB, op *operation, at *attempt, rec store.RecordRow) (outcome, error) {
	body := rec.ResponseBody
	if rec.Truncated {
		if op.render == nil {
			return outcome{}, errors.New("postkeys: a truncated response cannot be replayed without a RenderFunc")
		}
		var err error
		if body, err = op.render(ctx, db, rec); err != nil {
			return outcome{}, err
		}
	}
	at.number, at.fence, at.point, at.ref = rec.Attempt, rec.Fence, rec.RecoveryPoint, rec.ResourceRef
	a.logTransition(ctx, at, "replayed", store.RecordCompleted, rec.ResponseStatus, true)
	return outcome{resp: storedResponse{status: rec.ResponseStatus, header: responseHeader(&rec)},
		body: body, replayed: true, metric: telemetry.OutcomeReplayed}, nil
}

// servePhased runs a Phased operation. The record is read first, outside
// any transaction, as serveLocal does: a completed record of this request
// is replayed from that one read, so that a retry costs no claim (the
// claim of a key already held is a write transaction that rolls back,
// with ClaimInFirstPhase the first phase's inserts too). Anything else is
// decided under the claim: claim (its own commit, or with
// ClaimInFirstPhase the first phase's); when the key is held, decidePost
// says what to do with the record found: replay it, wait for it, take it
// over (expired lease: resume from the recovery point; unknown:
// reconcile), or refuse. A takeover that loses, and a wait, look at the
// record again.
func (a *Adapter) servePhased(ctx context.Context, op *operation, at *attempt, version int) (outcome, error) {
	waitUntil := time.Now().Add(a.cfg.InProgressWait)
	if rec, found, err := a.records.Get(ctx, a.db.Gorm, &store.RecordGetParams{ID: at.id}); err != nil {
		return outcome{}, a.db.Classify(err)
	} else if found && a.decidePhased(at, rec, true, waitUntil).Action == postReplay {
		return a.replay(ctx, a.db.Gorm.WithContext(ctx), op, at, rec)
	}
	// The attempt finishes what it started even if the client goes away
	// (a retry then finds the outcome stored), bounded by the request's
	// deadline, or the lease without one: a silent database cannot hold it.
	ctx, cancel := server.Detach(ctx, a.cfg.LeaseDuration)
	defer cancel()
	d := postDecision{Action: postClaim}
	var rec store.RecordRow
	for range maxDecisions {
		switch d.Action {
		case postClaim:
			out, held, err := a.claimPhased(ctx, op, at, version)
			if held == nil {
				return out, err
			}
			d = a.decidePhased(at, *held, true, waitUntil)
			rec = *held
			continue
		case postReplay:
			return a.replay(ctx, a.db.Gorm.WithContext(ctx), op, at, rec)
		case postResume, postReconcile:
			ok, err := a.takeover(ctx, at, rec)
			if err != nil {
				return outcome{}, err
			}
			if ok {
				return a.execute(ctx, op, at, d.Action == postReconcile)
			}
		case postWait:
			timer := time.NewTimer(d.Pause)
			<-timer.C
		default:
			return outcome{}, d.Err
		}
		var (
			found bool
			err   error
		)
		if rec, found, err = a.records.Get(ctx, a.db.Gorm, &store.RecordGetParams{ID: at.id}); err != nil {
			return outcome{}, a.db.Classify(err)
		}
		d = a.decidePhased(at, rec, found, waitUntil)
	}
	return outcome{}, errInProgress()
}

// decidePhased is decidePost for a phased request that found rec (when
// found) and may wait for it until waitUntil.
func (a *Adapter) decidePhased(at *attempt, rec store.RecordRow, found bool, waitUntil time.Time) postDecision {
	return decidePost(postState{Mode: Phased, Fingerprint: at.fingerprint, Found: found, Record: rec,
		WaitLeft: time.Until(waitUntil), PollInterval: a.cfg.PollInterval})
}

// claimPhased claims a phased request's key and, when it got it, runs the
// attempt to its outcome. With ClaimInFirstPhase the claim is the first
// phase's (executeUnclaimed). When the key is held, held is the record
// found and nothing was written.
func (a *Adapter) claimPhased(ctx context.Context, op *operation, at *attempt, version int) (_ outcome, held *store.RecordRow, _ error) {
	if op.claimInFirstPhase {
		return a.executeUnclaimed(ctx, op, at, version)
	}
	var (
		c       store.RecordClaim
		claimed bool
		rec     store.RecordRow
	)
	mono, clock := at.sendingLeaseWrite()
	err := a.db.WriteRetrying(ctx, func(tx *gorm.DB) error {
		var err error
		c, claimed, rec, err = a.claimTx(ctx, tx, at, version)
		return err
	})
	if err != nil {
		return outcome{}, nil, err
	}
	if !claimed {
		return outcome{}, &rec, nil
	}
	at.number, at.fence, at.claimedAt, at.point, at.ref = c.Attempt, c.Fence, a.engine.Now(), PointStarted, ""
	at.markLease(mono, clock)
	a.logTransition(ctx, at, "claimed", store.RecordInProgress, 0, false)
	out, err := a.execute(ctx, op, at, false)
	return out, nil, err
}

// executeUnclaimed runs a fresh attempt of an operation with
// ClaimInFirstPhase: RunFunc starts before the key is claimed, and its
// first phase claims it in the phase's own transaction. When that claim
// finds the key held, held is the record found, and nothing of the
// attempt was written. When RunFunc returns (or renews) before any phase,
// the key is claimed then, in a transaction of its own, and the outcome
// is finished as any attempt's: a response or a rejection completes the
// record, an error releases it.
func (a *Adapter) executeUnclaimed(ctx context.Context, op *operation, at *attempt, version int) (_ outcome, held *store.RecordRow, _ error) {
	at.unclaimed, at.version, at.held = true, version, nil
	at.number, at.fence, at.claimedAt, at.point, at.ref = 0, 0, a.engine.Now(), PointStarted, ""
	at.leaseSent, at.leaseSentClock = time.Time{}, time.Time{}
	resp, err := op.run(ctx, at)
	if at.held != nil {
		held, at.held, at.unclaimed = at.held, nil, false
		return outcome{}, held, nil
	}
	if at.unclaimed {
		if cerr := at.claimOwn(ctx); cerr != nil {
			at.unclaimed = false
			if at.held != nil {
				held, at.held = at.held, nil
				return outcome{}, held, nil
			}
			if !errors.Is(cerr, failpoint.ErrAbandoned) {
				return outcome{}, nil, cerr
			}
			resp, err = Response{}, cerr
		}
	}
	out, err := a.finish(ctx, op, at, resp, err, false)
	return out, nil, err
}

// execute runs a phased attempt that has just claimed or taken over its
// record: RunFunc, or ReconcileFunc when reconciling, then finish.
func (a *Adapter) execute(ctx context.Context, op *operation, at *attempt, reconciling bool) (outcome, error) {
	if err := at.failPoint(ctx, failpoint.AfterClaim); err != nil {
		return a.finish(ctx, op, at, Response{}, err, reconciling)
	}
	var (
		resp Response
		err  error
	)
	if reconciling {
		resp, err = op.reconcile(ctx, at)
	} else {
		resp, err = op.run(ctx, at)
	}
	return a.finish(ctx, op, at, resp, err, reconciling)
}

// takeover moves rec to this attempt under a new fence; false when another
// attempt was faster or the lease was renewed meanwhile.
func (a *Adapter) takeover(ctx context.Context, at *attempt, rec store.RecordRow) (bool, error) {
	var (
		c  store.RecordClaim
		ok bool
	)
	mono, clock := at.sendingLeaseWrite()
	err := a.db.WriteRetrying(ctx, func(tx *gorm.DB) error {
		var err error
		c, ok, err = a.records.Takeover(ctx, tx, &store.RecordTakeoverParams{ID: at.id, Fence: rec.Fence, From: rec.State,
			Lease: a.cfg.LeaseDuration})
		return err
	})
	if err != nil || !ok {
		return false, err
	}
	at.number, at.fence, at.claimedAt, at.point, at.ref = c.Attempt, c.Fence, a.engine.Now(), rec.RecoveryPoint, rec.ResourceRef
	at.markLease(mono, clock)
	a.logTransition(ctx, at, "taken_over", store.RecordInProgress, 0, false, slog.String("from", string(rec.State)))
	return true, nil
}

// finish stores what a phased attempt's RunFunc (or ReconcileFunc, when
// reconciling) returned: a response or a business rejection completes the
// record; an error releases the key when nothing was committed yet and
// leaves the record unknown otherwise. Every write is fenced.
func (a *Adapter) finish(ctx context.Context, op *operation, at *attempt, resp Response, err error, reconciling bool) (outcome, error) {
	switch {
	case errors.Is(err, failpoint.ErrAbandoned):
		// A crash at a fail point: whatever was committed stays, nothing
		// more is (even after Run.Complete, the client gets no answer).
		a.logTransition(ctx, at, "abandoned", store.RecordInProgress, 0, false, slog.String("error", store.RedactError(err)))
		return outcome{}, err
	case at.done != nil:
		// Run.Complete stored the outcome with the last phase: it is the
		// answer, whatever RunFunc made of it.
		return *at.done, nil
	case errors.Is(err, ErrFenced):
		return a.afterFenced(ctx, op, at)
	}
	var (
		stored storedResponse
		out    outcome
	)
	switch {
	case err == nil:
		if stored, err = a.storable(op, resp, ""); err == nil {
			out = outcome{resp: stored, body: resp.Body, metric: telemetry.OutcomeExecuted}
		}
	case op.isRejection(err):
		stored = a.rejection(err)
		out = outcome{resp: stored, body: stored.body, metric: telemetry.OutcomeRejected}
		err = nil
	}
	if err != nil {
		return a.failed(ctx, at, err, reconciling)
	}
	if !at.recorded {
		return out, nil
	}
	if err := at.failPoint(ctx, failpoint.BeforeComplete); err != nil {
		a.logTransition(ctx, at, "abandoned", store.RecordInProgress, 0, false, slog.String("error", store.RedactError(err)))
		return outcome{}, err
	}
	var ok bool
	err = a.db.Write(ctx, func(tx *gorm.DB) error {
		var err error
		p, err := a.completeParams(at, stored)
		if err != nil {
			return err
		}
		ok, err = a.records.Complete(ctx, tx, p)
		return err
	})
	if err != nil {
		// The record stays in progress: when its lease runs out, a retry or
		// the recovery worker settles it.
		return outcome{}, err
	}
	if !ok {
		return a.afterFenced(ctx, op, at)
	}
	a.logTransition(ctx, at, "completed", store.RecordCompleted, stored.status, false)
	return out, nil
}

// failed handles an attempt's error: before any phase committed nothing
// happened and the key is released; after one, the record is left unknown
// for the reconcile hook and the client is told 409 outcome_pending.
func (a *Adapter) failed(ctx context.Context, at *attempt, cause error, reconciling bool) (outcome, error) {
	if !at.recorded {
		return outcome{}, cause
	}
	if ctx.Err() != nil {
		// The deadline has passed: nothing can be sent any more. The record
		// stays in progress until its lease ends, and a retry or the
		// recovery worker settles it; the answer is 503 and cause says why.
		a.logTransition(ctx, at, "abandoned", store.RecordInProgress, 0, false, slog.String("error", store.RedactError(cause)))
		if framework.ErrorFor(cause).Code != wire.CodeUnavailable {
			cause = &framework.Error{Code: wire.CodeUnavailable,
				Detail: "the deadline passed before the outcome was recorded; retry with the same key", Err: cause}
		}
		return outcome{}, cause
	}
	var ok bool
	if at.point == PointStarted && !reconciling {
		err := a.db.Write(ctx, func(tx *gorm.DB) error {
			var err error
			ok, err = a.records.Release(ctx, tx, &store.RecordReleaseParams{ID: at.id, Fence: at.fence, Point: PointStarted})
			return err
		})
		if err != nil {
			return outcome{}, err
		}
		if !ok {
			return a.afterFenced(ctx, at.op, at)
		}
		a.logTransition(ctx, at, "released", stateReleased, 0, false, slog.String("error", store.RedactError(cause)))
		return outcome{}, cause
	}
	code := string(framework.ErrorFor(cause).Code)
	err := a.db.Write(ctx, func(tx *gorm.DB) error {
		var err error
		ok, err = a.records.MarkUnknown(ctx, tx, &store.RecordMarkUnknownParams{ID: at.id, Fence: at.fence, ErrorCode: code})
		return err
	})
	if err != nil {
		return outcome{}, err
	}
	if !ok {
		return a.afterFenced(ctx, at.op, at)
	}
	a.logTransition(ctx, at, "unknown", store.RecordUnknown, 0, false, slog.String("error", store.RedactError(cause)))
	return outcome{}, &framework.Error{Code: wire.CodeOutcomePending,
		Detail: "the outcome of this request is not known yet and is being reconciled; retry later with the same key", Err: cause}
}

// afterFenced answers a fenced-off attempt with the outcome of the attempt
// that took its record over, or 409 while that one still runs.
func (a *Adapter) afterFenced(ctx context.Context, op *operation, at *attempt) (outcome, error) {
	a.logTransition(ctx, at, "fenced", store.RecordInProgress, 0, false)
	rec, found, err := a.records.Get(ctx, a.db.Gorm, &store.RecordGetParams{ID: at.id})
	if err != nil {
		return outcome{}, a.db.Classify(err)
	}
	if found && rec.State == store.RecordCompleted && rec.Fingerprint == at.fingerprint {
		return a.replay(ctx, a.db.Gorm.WithContext(ctx), op, at, rec)
	}
	return outcome{}, errInProgress()
}
