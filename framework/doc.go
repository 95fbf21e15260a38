// Package framework is the shared core of retrysafe: what makes an HTTP write
// safe to retry, whichever of the two patterns serves it.
//
// The PUT pattern: a [Resource] declares a typed command, a [Mode]
// ([CreateOrReplace] or [CreateOnly]), a [Resource.RenderFunc], an optional
// replace guard and an optional creation hook. [NewCollection] builds it on
// an [Engine] and [Collection.Mount] serves PUT/GET/DELETE /{name}/{id} and a
// paginated list. Creation is INSERT … ON CONFLICT DO NOTHING against the
// (tenant_id, id) primary key, so a retried or concurrent create converges
// on one row and one creation hook; [Collection.PutTx] joins a caller's
// transaction. [Collection.MountLegacyPOST] serves an old POST endpoint
// through the same engine while clients move to PUT.
//
// Shared by both patterns (and by fallback/postkeys):
//   - [Bind] and [Binder]: strict JSON (no duplicate keys, valid UTF-8,
//     bounded depth and size, no unknown fields), defaults, validation.
//   - [Integer]: an int64 command field that binds every JSON spelling of an
//     integer (4200, 4200.0, 4.2e3) to one value, and so one fingerprint.
//   - [ComputeFingerprint]: SHA-256 of the canonical validated command with
//     tenant, operation, path parameters and semantic headers; versioned.
//     [ComputeFingerprintJSON] also returns the marshalled command, for a
//     caller that stores it.
//   - [Error], [ErrorFor], [WriteProblem]: stable problem codes, RFC 9457
//     bodies, and the one mapping from error to HTTP status.
//   - [WriteReply]: Idempotent-Replayed, Idempotency-Key, Location, ETag.
//   - [IdempotencyKey]: key parsing and validation.
//   - [Authenticator], [RequireAuth], [PrincipalFromContext]: tenant scoping
//     before any replay.
//   - [Retention]: the replay window and tombstone retention.
//   - [Metrics]: Prometheus counters by pattern, operation and outcome.
package framework
