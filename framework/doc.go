// Package framework is the shared core of retrysafe: what makes an HTTP write
// safe to retry, whichever of the two patterns serves it. The PUT pattern
// is package framework/collection (a resource at PUT /{name}/{id}); the
// POST Idempotency-Key fallback is package fallback/postkeys; both build
// on an [Engine] ([NewEngine]: the database, the problem codes, the
// metrics, the binder and the request log) and on what this package holds.
//
// Routes describe themselves for machine-readable API descriptions with
// [RouteDescription] values (collection.Collection.Describe, [DescribeGet]
// for a resource's own reads); package framework/openapi turns them into
// an OpenAPI 3.1 document.
//
// Shared by both patterns:
//   - [Bind] and [Binder]: strict JSON (no duplicate keys, valid UTF-8
//     without unpaired surrogate escapes, bounded depth and size, member
//     names matched to fields exactly, no unknown fields), defaults,
//     validation. Every body of every route is bound by [Bind].
//   - Integers: [Bind] binds every JSON spelling of an integer (4200,
//     4200.0, 4.2e3) into any integer field of a command (int, int8 …
//     uint64, a type of the application's own, [Integer]) as one value, and
//     so one fingerprint; [Integer] does the same under encoding/json.
//   - [ComputeFingerprint]: SHA-256 of the canonical validated command with
//     tenant, operation, path parameters and semantic headers; versioned.
//     [ComputeFingerprintJSON] also returns the marshalled command, for a
//     caller that stores it.
//   - [Error], [Errorf], [Engine.WriteProblem]: problem codes, RFC 9457
//     bodies, and the one mapping from error to HTTP status. The generic
//     codes come from package wire, the contract shared with the client; a
//     resource registers its business codes with [Engine.RegisterCodes]
//     ([Codes]), and exactly the retryable codes carry Retry-After.
//   - [WriteReply]: Idempotent-Replayed, Idempotency-Key, Location, ETag.
//   - [IdempotencyKey]: key parsing and validation (wire.ParseKey).
//   - [Retention]: the replay window and tombstone retention.
//   - [Metrics]: Prometheus counters by pattern, operation and outcome,
//     registered on the application's registry ([NewMetrics]). A request
//     whose client went away ([ClientGone]) is outcome client_gone and is
//     logged at Info, never as a server error; the request deadline
//     (server.Deadline) running out stays a 503.
//   - [TraceOutcome], [StartSpan], [TraceLogHandler]: OpenTelemetry spans
//     on the application's TracerProvider (pattern, operation, outcome and
//     key hash on the request's server span, which server.TraceRequests
//     starts; child spans for the steps, the store's transactions and the
//     SQL statements, see store.Config.TracerProvider) and trace IDs on log
//     records. The framework installs no global provider.
//
// The HTTP plumbing around the patterns (the server's timeouts, the
// request deadline, authentication and tenant scoping, readiness, the
// problem answers of unknown routes and panics, the request's server span)
// is package framework/server. [Bind] refuses NUL and invalid UTF-8 in
// bodies and numbers longer than [MaxNumberLength] before they are parsed.
//
// The routes live on a gin engine, an http.Handler: a net/http or chi
// service mounts it under a prefix of its own (http.StripPrefix, with the
// prefix in collection.Resource.BasePath; see the collection package's
// Example_serveMux) and serves its root handler through server.New or
// behind server.Framing (no request smuggled after another's body, no
// singleton field sent twice with different values). Loggers are
// *slog.Logger; with zap, slog.New(zapslog.NewHandler(core)) from
// go.uber.org/zap/exp/zapslog. [EngineConfig.RequestLogLevel] sets the
// level of the events each request logs (Info by default); failures keep
// their own.
//
// Events beyond the request live in the subpackages outbox (written in the
// effect's transaction, relayed at least once; outbox/natsjs for NATS
// JetStream) and inbox (a consumer's effect once per message).
package framework
