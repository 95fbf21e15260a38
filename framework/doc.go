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
//
// # The fingerprint
//
// A fingerprint is "v1:" and the SHA-256 of the JSON envelope
// {"v":1,"tenant":…,"op":…,"path":…,"headers":…,"command":…} (in that
// order; path and headers left out when empty, their keys sorted, strings
// escaped as encoding/json escapes them), where the command is the bound,
// defaulted, validated and normalized command in canonical JSON: sorted
// keys, no whitespace, numbers as significant digits and an exponent
// (4200, 4200.0 and 4.2e3 are all 42e2). Two requests that mean the same
// thing have one fingerprint, so a retry that a client library
// re-serialized is still recognised; a resource puts its own canonical
// forms in its [Normalizer] (an order's price "10.0" becomes "10.00").
// Changing any of this means a new [FingerprintVersion].
//
// Every integer field of a command, whatever its Go type (int, uint8, a
// type of the application's own, behind a pointer, in a slice, map or
// nested struct), binds every spelling of one integer (2, 2.0, 2e0,
// 0.2e1) to one value: [Bind] reads the number through its canonical
// form, so no spelling longer than [MaxNumberLength] reaches a parser and
// none is parsed with arbitrary precision, and refuses a fraction or a
// value out of the field's range as validation_failed ("must be an
// integer from 0 to 255").
//
// The command is marshalled once; its canonical form and the envelope are
// written in one pass into one pooled buffer and hashed, with no decode
// into maps and no second encoding. The body is checked by one scanner in
// one pass over its bytes, which allocates nothing and words syntax errors
// as encoding/json does, then decoded by encoding/json/v2
// (github.com/go-json-experiment/json), which matches member names to
// fields case-sensitively: encoding/json folds case (and ſ to s, K to
// k), which let {"amount":100,"Amount":1} past the duplicate check and
// bind 1. The first implementations (a walk over json.Decoder tokens, a
// decode into map[string]any) stay in the tests, as the references the
// tests and a fuzz target compare with, answer for answer.
//
// # The replay cache
//
// A retry computes the fingerprint once per body, not once per request.
// Once a body was replayed, the request front keeps its bound command and
// fingerprint in a [ReplayCache], an LRU with a budget of bodies
// ([DefaultReplayCache]; each entry counts at least 512 bytes; bodies up
// to [MaxReplayCacheBody]) keyed by a length-prefixed SHA-256 of the
// tenant, the path parameters, the semantic headers and the body's bytes:
// everything the fingerprint and the bind are functions of. A retry that
// finds its entry is still decided on the row or record it reads (tenant,
// fingerprint, state and replay window are checked per request); only a
// reply or a refusal is answered with the kept command, and a decision to
// write binds the body again, so that a write, which sets keys on its
// command's child rows, never reaches the shared entry.
//
// # Problems and codes
//
// The contract lives once, in package wire (standard library only): the
// header names, the generic codes with status, title and retryability, the
// key syntax and the problem type. This package uses wire's names and
// adds none of its own. Business codes are open: each [Engine] has a
// registry ([Codes]) seeded with the generic codes, and a resource adds
// its own with [Engine.RegisterCodes] when it is built (payments:
// card_declined; transfers: currency_mismatch). The same description twice
// is a no-op (two instances of a resource on one engine); a different one
// is [ErrCodeConflict], so a wrong wiring stops the process at start-up,
// and a declaration that names a code nobody registered is
// [ErrCodeUnregistered].
//
// One function renders every problem: status and title come from the
// registry, Retry-After is set if and only if the code is retryable (the
// error's RetryAfter, else 1s), and every 401 carries WWW-Authenticate:
// Bearer. A code missing from the registry at that point is a server bug:
// 500 internal, the code logged and not sent, as is any error the mapping
// does not know. [Engine.WriteProblem] uses the engine's registry;
// [WriteProblem] without an engine (authentication, unknown routes) knows
// the generic codes only. Because exactly the retryable answers carry
// Retry-After, a client can judge a code it does not know by its status and
// that header (client.ClassifyAnswer).
package framework
