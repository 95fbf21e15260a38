// Package postkeys is the POST Idempotency-Key fallback of retrysafe: for
// operations that cannot be a PUT with a client-generated ID, because the
// ID comes from a third party (a payment provider's charge) or because the
// effect is not a resource at all (moving a balance). The server stores the
// key, a fingerprint of the request and the response durably, and replays
// the response to every retry with the same key. Prefer the PUT pattern
// (framework.Collection) wherever the client can pick the ID.
//
// An [Adapter] ([New]) sits on a framework.Engine and reuses its binder,
// fingerprint, problem and replay writers, retention policy, clock, logger
// and metrics. [Register] declares an [Operation] over a typed command and
// returns an [Endpoint] whose Handle is mounted behind
// framework.RequireAuth:
//
//	// Business rejection codes are registered on the engine first.
//	err := engine.RegisterCodes(framework.CodeInfo{Code: "currency_mismatch", Status: 409, Title: "Currency mismatch"})
//	ep, err := postkeys.Register(keys, postkeys.Operation[TransferCmd]{
//		Name:           "transfers",
//		RejectionCodes: []framework.Code{"currency_mismatch"}, // registered, final, 4xx
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
// missing where [KeyRequired] or invalid), the body (framework.Bind: 400
// malformed_json / validation_failed), the fingerprint
// (framework.ComputeFingerprint of tenant, operation, path parameters,
// semantic headers and the validated command), then the claim: one INSERT …
// ON CONFLICT statement on the record's primary key (tenant, operation,
// key) that also reclaims a record past its expires_at.
//
// Two modes:
//
//   - [Local]: the operation touches only this database. The claim, the
//     business writes of [Operation.ExecuteFunc] and the completion commit
//     in one transaction, so there is no crash window; a concurrent duplicate
//     waits on the key until the winner commits, then replays (a wait past
//     the store's lock timeout is 409 request_in_progress).
//   - [Phased]: the operation calls another system. [Operation.RunFunc]
//     commits atomic phases with [Run.Phase], each recording a recovery
//     point; calls carry [Run.DownstreamKey]; the attempt holds a lease and
//     every write is fenced by its attempt number, so an attempt whose lease
//     was taken over writes nothing ([ErrFenced]). A retry that finds a live
//     lease waits up to Config.InProgressWait, then answers 409
//     request_in_progress; one that finds an expired lease takes the record
//     over and resumes from its recovery point. An error before the first
//     phase releases the key; an error after it leaves the record unknown
//     (409 outcome_pending), which [Operation.ReconcileFunc] settles inline
//     on the next retry or in the recovery worker — never by running the
//     operation again blindly.
//
// Outcomes that bind the key: a response ([Response], stored with the
// headers of Config.StoredHeaders and a body capped at Config.MaxStoredBody,
// re-rendered by [Operation.RenderFunc] above it) and the business
// rejections listed in [Operation.RejectionCodes] (stored as the exact bytes
// of the engine's RenderProblem). Both are replayed byte for byte with
// Idempotent-Replayed: true for the engine's replay window. Validation
// errors, 401/403 and 429 are never stored.
//
// [Adapter.Start] runs the recovery worker ([Adapter.RecoverOnce]) and the
// janitor ([Adapter.CleanupOnce], which deletes expired completed records in
// batches and never unfinished ones); [Adapter.Stop] stops them. Every
// state transition is one slog event carrying the SHA-256 of the key, never
// the key; the gauges retrysafe_postkeys_oldest_in_progress_age_seconds and
// retrysafe_postkeys_unknown_records are read from the database at every
// scrape. With tracing set up (see [framework.TraceRequests]) the claim and
// every phase are child spans of the request's.
//
// [Endpoint.Describe] describes a registered operation (key policy,
// replayed rejections, outcome_pending for phased operations) for
// framework/openapi.
//
// Tests simulate crashes with Config.FailPointFunc at
// [FailPointBeforeComplete], [FailPointAfterPhase] points and the points an
// operation names with [Run.FailPoint].
package postkeys
