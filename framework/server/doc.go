// Package server is the HTTP plumbing of a retrysafe service, around the
// patterns of packages framework/collection and fallback/postkeys: what
// keeps a client or an outage from holding the service, who the caller
// is, and the request's server span.
//
// Limits:
//   - [Deadline]: a deadline on every request (default 10s); a database
//     that does not answer gives 503 unavailable by then. [Detach] keeps
//     it for work that must outlive the client.
//   - [New] and [Config]: an *http.Server with header, body, write and idle
//     timeouts, serving its handler behind [Framing]. [RequireAuth]
//     answers a refused request without reading its body.
//   - [Framing]: no request runs hidden in another's body (the connection
//     of a chunked or HTTP/1.0 request is closed after its answer), and a
//     singleton field (Authorization, Idempotency-Key, If-Match,
//     Content-Type) sent twice with different values is 400. A service
//     with an *http.Server of its own wraps its root handler in it.
//   - [Readiness]: a /readyz handler, 503 while the database does not
//     answer.
//   - [StorableText]: NUL and invalid UTF-8 in paths and queries are 400
//     ([Storable] is its test of one value).
//
// Who the caller is: [Authenticator], [RequireAuth], [Tenant],
// [PrincipalFromContext] scope every request to a tenant before any replay
// ([NewStaticTokens] for fixed tokens); a 401 carries
// WWW-Authenticate: Bearer.
//
// Problems and traces: [UseProblemHandlers] ([NoRoute], [NoMethod],
// [Recovery]) answers unknown routes, unknown methods and panics with
// problem+json on any gin router; [TraceRequests] runs every request in an
// OpenTelemetry server span (otelgin), to which the patterns add their
// outcome (telemetry.TraceOutcome). [PropagateTraceContext] continues the
// caller's trace without a span.
//
// The metrics, the patterns' spans and the request log's level are
// package framework/telemetry: the engine of package framework holds the
// metrics and counts every write into them, and this package imports
// framework for its problems, so they live below both.
package server
