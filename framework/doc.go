// Package framework is the shared core of retrysafe: what makes an HTTP write
// safe to retry, whichever of the two patterns serves it.
//
// The PUT pattern: a [Resource] declares a typed command and the
// application's own gorm model, which embeds [System] (tenant_id, id,
// version, status, fingerprints, timestamps; primary key (tenant_id, id))
// next to its typed business columns and has-many child rows. A
// [Resource.ModelFunc] maps the command onto the model (the two may be one
// struct), [Resource.RenderFunc] renders the representation, and an
// optional replace guard and creation hook complete it. [NewCollection]
// builds it on an [Engine] and [Collection.Mount] serves PUT, GET, HEAD and
// DELETE /{name}/{id} and a newest-first list with filters. A PUT reads
// the row first; a replay is answered from that read. A miss is created
// in one transaction (one round trip on PostgreSQL); when a concurrent
// create of the same ID committed first, that transaction rolls back and
// the PUT falls back to INSERT … ON CONFLICT (tenant_id, id) DO NOTHING,
// so a retried or concurrent create converges on one row, one set of child
// rows and one creation hook. What a PUT does is decided by one pure function from the
// row it read and the database clock read with it (the replay window and
// the tombstone retention are judged on the database clock, which also
// stamps the rows' times, so processes whose clocks disagree agree);
// every statement on resource rows goes through the
// [RowStore] seam, whose contract suite is framework/rowstoretest. Every
// write has a transactional twin ([Collection.PutTx],
// [Collection.PatchTx], [Collection.DeleteTx], [Collection.SetStatusTx]).
// [Collection.MountLegacyPOST] serves an old POST endpoint through the
// same engine while clients move to PUT.
//
// A conditional write converges: a PUT or PATCH whose If-Match is stale
// but whose result is already the current state (its fingerprint is the
// one stored with the current version) is answered 200 with the current
// representation and writes nothing, because it is the retry of a write
// whose answer was lost; a stale If-Match whose result differs stays 412.
//
// Every create-or-replace resource also gets PATCH /{name}/{id}
// ([Collection.Patch], [Collection.PatchTx]), derived from its PUT: a merge
// patch (RFC 7396; [ContentTypeMergePatch] or application/json) or a JSON
// Patch (RFC 6902; [ContentTypeJSONPatch], If-Match required, else 428
// precondition_required) is applied to the command a PUT of the current
// state would carry ([Resource.CommandFunc], which defaults to the
// representation decoded into the command), the result is bound and
// validated by [Bind] exactly as a PUT body, and it is written by the
// replace path, under the row lock: the same guard, versions, ETags,
// fingerprints and [Resource.OnReplaceFunc]. A PATCH never creates.
//
// Routes describe themselves for machine-readable API descriptions with
// [RouteDescription] values ([Collection.Describe],
// [Collection.DescribeLegacyPOST], [DescribeGet] for a resource's own
// reads); package framework/openapi turns them into an OpenAPI 3.1
// document.
//
// Shared by both patterns (and by fallback/postkeys):
//   - [Bind] and [Binder]: strict JSON (no duplicate keys, valid UTF-8
//     without unpaired surrogate escapes, bounded depth and size, member
//     names matched to fields exactly, no unknown fields), defaults,
//     validation. Every body of every route is bound by [Bind].
//   - [Integer]: an int64 command field that binds every JSON spelling of an
//     integer (4200, 4200.0, 4.2e3) to one value, and so one fingerprint.
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
//   - [Authenticator], [RequireAuth], [Tenant], [PrincipalFromContext]:
//     tenant scoping before any replay; a 401 carries
//     WWW-Authenticate: Bearer.
//   - [UseProblemHandlers], [NoRoute], [NoMethod], [Recovery]: problem+json
//     answers for unknown routes, unknown methods and panics on any gin
//     router.
//   - [Retention]: the replay window and tombstone retention.
//   - [Metrics]: Prometheus counters by pattern, operation and outcome,
//     registered on the application's registry ([NewMetrics]). A request
//     whose client went away ([ClientGone]) is outcome client_gone and is
//     logged at Info, never as a server error; the request deadline
//     ([Deadline]) running out stays a 503.
//   - [TraceRequests], [TraceOutcome], [StartSpan], [TraceLogHandler]:
//     OpenTelemetry spans on the application's TracerProvider (the
//     request's server span from otelgin, with pattern, operation, outcome
//     and key hash; child spans for the steps, the store's transactions and
//     the SQL statements, see store.Config.TracerProvider) and trace IDs
//     on log records. The framework installs no global provider.
//
// Limits, so that no client and no outage holds the service:
//   - [Deadline]: a deadline on every request (default 10s); a database
//     that does not answer gives 503 unavailable by then. [Detach] keeps
//     it for work that must outlive the client.
//   - [NewServer] and [ServerConfig]: header, body, write and idle timeouts.
//     [RequireAuth] answers a refused request without reading its body.
//   - [Readiness]: a /readyz handler, 503 while the database does not answer.
//   - [StorableText] and [Bind]: NUL and invalid UTF-8 in paths, queries and
//     bodies are 400, and numbers longer than [MaxNumberLength] are refused
//     before they are parsed.
//
// The routes live on a gin engine, an http.Handler: a net/http or chi
// service mounts it under a prefix of its own (http.StripPrefix, with the
// prefix in [Resource.BasePath]; see Example_serveMux). Loggers are
// *slog.Logger; with zap, slog.New(zapslog.NewHandler(core)) from
// go.uber.org/zap/exp/zapslog. [EngineConfig.RequestLogLevel] sets the
// level of the events each request logs (Info by default); failures keep
// their own.
//
// Events beyond the request live in the subpackages outbox (written in the
// effect's transaction, relayed at least once; outbox/natsjs for NATS
// JetStream) and inbox (a consumer's effect once per message).
package framework
