// Package framework is the shared core of retrysafe: what makes an HTTP write
// safe to retry, whichever of the two patterns serves it. The PUT pattern
// is package framework/collection (a resource at PUT /{name}/{id}); the
// POST Idempotency-Key fallback is package fallback/postkeys; both build
// on an [Engine] ([NewEngine]: the database, the problem codes, the
// metrics, the binder and the request log) and on what this package holds.
//
// What both patterns share, in groups:
//
//   - The engine: [Engine], [EngineConfig], [NewEngine].
//   - The request front: [Front] ([NewFront], [FrontConfig], [Target]). Its
//     [Front.Serve] reads the body (within its size bound, JSON only),
//     answers a retry of bytes already replayed from its [ReplayCache]
//     ([DefaultReplayCache], [MaxReplayCacheBody]), binds and fingerprints
//     the command, and hands both to the pattern; every write of both
//     patterns comes in through one. [Front.Fingerprint] is the SHA-256 of
//     the canonical validated command with tenant, operation, path
//     parameters and semantic headers, versioned ([FingerprintVersion];
//     logs carry its [FingerprintPrefix]).
//   - Binding: [Bind] and [Binder] ([NewBinder], [BinderConfig]): one JSON
//     check in one pass over the body (valid UTF-8 without unpaired
//     surrogate escapes, one value, no duplicate keys, bounded depth
//     ([DefaultMaxDepth]) and size ([DefaultMaxBodyBytes]), no NUL, no
//     number longer than [MaxNumberLength]), then a decode that matches
//     member names to fields exactly and refuses unknown fields, then
//     [Defaulter], validation, [Checker] and [Normalizer]. Every body of
//     every route is bound by [Bind]. [Bind] binds every JSON spelling of
//     an integer (4200, 4200.0, 4.2e3) into any integer field of a command
//     (int, int8 … uint64, a type of the application's own, [Integer]) as
//     one value, and so one fingerprint; [Integer] does the same under
//     encoding/json.
//   - Problems and codes: [Error], [Errorf], [AsError], [ErrorFor] and one
//     sentinel per generic code ([ErrNotFound], …) for errors.Is; the codes
//     are package wire's, the contract shared with the client, and a
//     resource registers its business codes with [Engine.RegisterCodes]
//     ([Codes], [NewCodes]). [Engine.WriteProblem] ([WriteProblem],
//     [RenderProblem] without an engine) is the one mapping from an error
//     to an HTTP status and an RFC 9457 body; exactly the retryable codes
//     carry Retry-After. [Engine.WriteFailure] counts and traces a failed
//     write and answers it.
//   - Replies: [WriteReply] and [Reply]: Idempotent-Replayed,
//     Idempotency-Key, Location, ETag, the same on the wire whichever
//     pattern answers. [IdempotencyKey] reads and checks the key
//     (wire.ParseKey).
//   - Retention: [Retention] ([DefaultRetention]), the replay window and
//     the tombstone retention.
//   - Route descriptions: [RouteDescription], [ParamDescription],
//     [ResponseDescription], [KeyUse], [DescribeGet] and the problem lists
//     [ReadProblems], [WriteProblems], [ReplayResponseHeaders]:
//     collections, postkeys operations and a resource's own routes
//     describe themselves with them, and package framework/openapi turns
//     them into an OpenAPI document without reaching into any of them.
//
// Metrics, the patterns' spans, the request log's level and the key hash
// are package framework/telemetry; the engine counts every write into its
// [EngineConfig.Metrics]. The HTTP plumbing around the patterns (the
// server's timeouts, the request deadline, authentication and tenant
// scoping, readiness, the problem answers of unknown routes and panics,
// the request's server span) is package framework/server.
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
