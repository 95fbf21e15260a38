// Package postkeys is the POST Idempotency-Key fallback of retrysafe: for
// operations that cannot be a PUT with a client-generated ID, because the
// ID comes from a third party (a payment provider's charge) or because the
// effect is not a resource at all (moving a balance). The server stores the
// key, a fingerprint of the request and the response durably, and replays
// the response to every retry with the same key. Prefer the PUT pattern
// (collection.Collection) wherever the client can pick the ID.
//
// An [Adapter] ([New]) sits on a framework.Engine and reuses its binder,
// fingerprint, problem and replay writers, retention policy, clock, logger
// and metrics. [Register] declares an [Operation] over a typed command and
// returns an [Endpoint] whose Handle is mounted behind
// server.RequireAuth:
//
//	// Business rejection codes are registered on the engine first.
//	err := engine.RegisterCodes(wire.CodeInfo{Code: "currency_mismatch", Status: 409, Title: "Currency mismatch"})
//	ep, err := postkeys.Register(keys, postkeys.Operation[TransferCmd]{
//		Name:           "transfers",
//		RejectionCodes: []wire.Code{"currency_mismatch"}, // registered, final, 4xx
//		ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req postkeys.Request[TransferCmd]) (postkeys.Response, error) {
//			// business writes on tx, then:
//			return postkeys.JSON(http.StatusCreated, transfer, transfer.ID)
//		},
//	})
//	v1.POST("/transfers", ep.Handle)
//
// Every request is checked in this order, and nothing is stored until the
// last step: authentication (before any replay), the key
// (framework.IdempotencyKey: Idempotency-Key or X-Idempotency-Key, 400 when
// missing where [KeyRequired] or invalid), the body (framework.Bind, through
// the operation's request front, framework.Front: 400 malformed_json /
// validation_failed), the fingerprint (of tenant, operation, path
// parameters, semantic headers and the validated command), then the
// claim: one INSERT … ON CONFLICT statement on the record's primary key
// (tenant, operation, key); a record past its expires_at is reclaimed by
// one statement too.
// The body and fingerprint steps are done once per body: a retry that
// repeats the bytes of one already replayed takes its command and
// fingerprint from a cache ([Config.ReplayCache]) and is answered when its
// key's record is a completed one of this request; anything else binds
// it again.
//
// Two modes:
//
//   - [Local]: the operation touches only this database. The record is
//     read first, outside any transaction, and a key seen before is
//     answered from that read. A new (or expired) key is claimed, its
//     business writes ([Operation.ExecuteFunc]) made and its record
//     completed in one transaction, the claim first, so there is no crash
//     window. A concurrent duplicate waits on the key in its claim
//     statement, before any of the operation's code runs, until the winner
//     commits (it then replays) or rolls back (it then executes); a wait
//     past the store's lock timeout (store.Config.LockTimeout, 1s by
//     default) for the key's own record is 409 request_in_progress; a wait
//     for anything else (another key's rows, a table lock, SQLite's
//     database lock) is 503 unavailable, with Retry-After either way: a
//     key is told it is in progress only when it is.
//   - [Phased]: the operation calls another system. [Operation.RunFunc]
//     commits atomic phases with [Run.Phase], each recording a recovery
//     point; calls carry [Run.DownstreamKey] and are preceded by
//     [Run.Renew] (or [Run.RenewFor]); the attempt holds a lease and every
//     write is fenced (see below), so an attempt that stalled past its
//     lease writes nothing and calls nothing ([ErrFenced]). A retry that
//     finds a live lease waits up to Config.InProgressWait, then answers 409
//     request_in_progress; one that finds an expired lease takes the record
//     over and resumes from its recovery point. An error before the first
//     phase releases the key; an error after it leaves the record unknown
//     (409 outcome_pending), which [Operation.ReconcileFunc] settles inline
//     on the next retry or in the recovery worker — never by running the
//     operation again blindly.
//
// Both modes read the route's path parameters, which are part of the
// fingerprint: [Request].PathParams in local mode, [Run.PathParams] in
// phased mode (nil in the recovery worker, which has no request). The
// program examples/invoices is a complete phased operation to copy, and
// docs/phased-operations.md walks through it.
//
// A phased attempt costs a transaction for the claim, one per phase, one
// per renewal and one for the completion. Three opt-ins cut that down
// without opening a crash window the recovery point does not cover:
//
//   - [Operation.ClaimInFirstPhase]: the claim commits with the first
//     phase (the claim statement first, then the phase's writes, then its
//     recovery point). A crash before that commit leaves nothing, as a
//     release would; a duplicate's first phase finds the key held, writes
//     nothing and answers from the record. RunFunc starts before the claim,
//     so it must do nothing observable before its first phase.
//   - [Run.RenewFor]: the renewal before a call bounded by a known time
//     makes no round trip when the lease certainly covers that time plus
//     a margin. The process judges this on its monotonic clock, counting
//     from before it sent the statement that set the lease (the database
//     set it from a later moment), so a pause of the process always counts
//     against the lease; an attempt that paused past that point renews and
//     is fenced as with [Run.Renew].
//   - [Run.Complete]: the last phase commits with the stored response. A
//     crash before that commit leaves the record at the previous recovery
//     point, which a retry or the recovery worker resumes or reconciles.
//
// Outcomes that bind the key: a response ([Response], stored with the
// headers of Config.StoredHeaders and a body capped at Config.MaxStoredBody,
// re-rendered by [Operation.RenderFunc] above it) and the business
// rejections listed in [Operation.RejectionCodes] (stored as the exact bytes
// of the engine's RenderProblem). Both are replayed byte for byte with
// Idempotent-Replayed: true for the engine's replay window. Validation
// errors, 401/403 and 429 are never stored, and neither is a 5xx, an error
// or a Response with a 5xx status: it rolls a local operation back whole
// and releases a phased key before any phase (the client gets the
// Response as it was made, unstored; a retry executes again), and leaves a
// phased record unknown after one (409 outcome_pending, then reconciled).
//
// [Adapter.Start] runs the recovery worker ([Adapter.RecoverOnce]) and the
// janitor ([Adapter.CleanupOnce], which deletes expired completed records in
// batches and never unfinished ones); [Adapter.Stop] stops them. Every
// state transition is one slog event carrying the SHA-256 of the key, never
// the key; the gauges retrysafe_postkeys_oldest_in_progress_age_seconds and
// retrysafe_postkeys_unknown_records are read from the database at every
// scrape. With tracing set up (see [server.TraceRequests]) the claim and
// every phase are child spans of the request's.
//
// [Endpoint.Describe] describes a registered operation (key policy,
// replayed rejections, outcome_pending for phased operations, the other
// answers it declares in [Operation.Problems], its path parameters) for
// framework/openapi.
//
// # Records, the database clock and fencing
//
// Every statement on idempotency_records is a method of the store's one
// seam, [store.Records], with a parameter struct each, which the adapter
// calls directly on the driver of the engine's database
// ([store.Driver.Records]: the statements written once, each driver's
// spellings beside it; their contract suite is framework/store/storetest).
// This package holds no SQL and no record interface of its own: a record
// is a [store.RecordRow] ([Adapter.Lookup], [Operation.RenderFunc]) in one
// of its states ([store.RecordState]), and what the adapter adds to the store's
// view is done in small helpers: the stored response's header is kept as
// a JSON object of its http.Header, an operation's published codes as a
// JSON array.
//
// Leases, expiry and retention are evaluated on the database clock
// (statement_timestamp() on PostgreSQL, the time the statement arrived
// rather than the start of a transaction that may have stalled;
// UTC_TIMESTAMP(6) on MariaDB; 'now' on SQLite), in the statement
// that acts on them, never on a process clock: processes with skewed clocks
// cannot take over live work, and no lease is computed from a time taken
// before a pause. Tests do not sleep: a test driver
// (storetest.ShiftRecordClock) shifts the database clock as the record
// statements read it, by their test clock's offset, so that one Advance
// moves the engine's clock and the database's together; production
// statements read the clock as it is.
//
// Each claim, reclaim and takeover draws a fencing token ([store.RecordRow].Fence)
// that never repeats for a key, across releases, re-claims and the
// janitor's deletes: it comes from a database sequence (on SQLite a
// one-row counter advanced by triggers in the same statement), not from a
// per-record counter, which would start again once the record is gone.
// A phase commit, a renewal, a completion, a release or an unknown mark
// applies only while the attempt's token is the record's and its lease is
// live on the database clock. So an attempt that wakes up after a
// takeover, after a release and a new claim, or after its own lease ended
// writes nothing, completes nothing and, since a phased operation renews
// its lease before each call out (or, with [Run.RenewFor], skips the
// renewal only while its own clock proves the lease outlasts the call),
// calls no provider. [Run.Attempt] is the
// human-readable attempt count; it restarts after a release, the token
// does not.
//
// Claiming a free key is INSERT … SELECT … WHERE NOT EXISTS … ON CONFLICT
// DO NOTHING. A held key (the replay path) draws no fence, attempts no
// insert and locks nothing: the record is read plainly, and a completed,
// unexpired one of the same request is replayed without a lock or a
// write. Only an expired record goes through the reclaiming statement (ON
// CONFLICT DO UPDATE … WHERE expired). Records in the unknown state never
// expire and the janitor never deletes them: they stay until reconciled.
//
// # One decision function
//
// What a request does with the record of its key is decided by one pure
// function, decidePost (post_decision.go), over a small state: the mode,
// the request's fingerprint, the record found with its expiry and lease
// judged on the database clock, and the wait left. Local: create, claim,
// replay or refuse; phased: claim, replay, resume past an expired lease,
// reconcile an unknown record, wait while a live lease runs, or refuse.
// TestDecidePost is the contract as a table, and TestDecidePostEveryState
// checks every combination for what must always hold: only the request's
// own completed record is replayed, only a free key claimed, a live lease
// never taken over, another request's record always a 422. The serving
// code reads or claims, calls it and carries the decision out; a takeover
// names the fence of the record decided on, so a decision made on a
// record that changed meanwhile writes nothing and is made again on a
// fresh read.
//
// A local operation reads its record first, outside any transaction, and
// claims in the first statement of the transaction that runs it, so a
// concurrent duplicate waits on the key before any of the operation's
// code has run (TestLocalDuplicateNeverExecutes). Writing the record
// once, completed, after the business writes would save a round trip, but
// let the duplicate run the operation (rolled back) and wait as long as
// the winner. A local create is the read plus one write transaction, a
// replay the read alone. Where a deadlock rolled back a transaction whose
// effects are all in the database (a local operation, a phased claim or
// takeover), it runs again (store.DB.WriteRetrying); a phased operation's
// later phases, which run between calls to another system, are not.
//
// # What a phased request commits
//
// A phased operation must commit a phase before its first side effect: an
// expired lease at the started point is released by the recovery worker
// (nothing happened), any later point goes to the operation's
// ReconcileFunc. With the three opt-ins above, the demo's payment create
// (resources/payments) commits three transactions on PostgreSQL, down
// from six (TestPaymentCreateCostsThreeCommits):
//
//  1. The claim with the pending payment (ClaimInFirstPhase): the payment
//     row and its downstream key must be durable before the provider is
//     called, so that every later attempt asks with the same key, and the
//     claim must be durable by then, so that no other attempt starts the
//     payment. Both touch only this database, so they commit together.
//  2. The provider's charge: the sandbox keeps its ledger in the same
//     database; a real provider's write is elsewhere, and it is the side
//     effect itself. The renewal before it makes no round trip
//     (Run.RenewFor of the call's bound).
//  3. The charge with the stored response (Run.Complete): the charge ID,
//     the outbox event, the last recovery point and the response commit
//     once the provider has answered. A crash before it leaves the record
//     at its previous point, which a retry resumes (the provider
//     deduplicates by the downstream key) or the recovery worker
//     reconciles.
//
// A phased replay reads the record first, outside any transaction, as the
// local mode does: a completed record of the same request is replayed from
// that read, and everything else is decided under the claim.
//
// # Fail points
//
// The framework's tests simulate crashes and stalls at fail points: after
// a claim, after each phase, before the completion, and at points an
// operation of the repository names. The function that pauses or crashes
// an attempt there travels in its context (the module's internal
// failpoint package; the demo's -pause-at flag uses it too), so no Config
// field and no exported name of this package carries it. Every point lies
// between two transactions of the attempt: a fail point changes none of
// them, so a test that pauses or crashes an attempt there exercises the
// transactions production commits (TestFailPointsKeepTheTransactions):
// a fault test that split a transaction would prove the exactly-once
// promise of a layout nobody runs.
//
// # Operators
//
// An operator settles what the recovery worker cannot: [Resolve] (or
// [Adapter.Resolve]) completes a record whose outcome is unknown with the
// answer the operator chose ([OutcomeSucceeded] with a reference and a
// body that passes the request check, or [OutcomeFailed] with a final
// code the record's operation declared, or a generic one), through the
// worker's fenced takeover and with an audit row in the same transaction;
// it refuses a record whose lease is live ([ErrLeaseHeld]) and a replay
// window shorter than the lease. [Adapter.PublishOperations] (which
// [Adapter.Start] calls) writes what each operation declares to the
// database, where a tool that is not the service reads it
// ([PublishedCodes]). [Cleanup] and the store's [store.Records].List
// serve the same tooling (the retrysafe command).
package postkeys
