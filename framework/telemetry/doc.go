// Package telemetry is what a retrysafe service reports about its
// requests, for both patterns: Prometheus counters, OpenTelemetry spans,
// the level of the request log and the hash that stands for a key.
//
//   - [Metrics] ([NewMetrics]): requests by pattern, operation and outcome
//     ([OutcomeExecuted], [OutcomeReplayed], … [OutcomeClientGone]) and
//     legacy POST calls by tenant, on the application's registry. Pass
//     them as framework.EngineConfig's Metrics; the engine counts every
//     write of both patterns into them.
//   - [TraceOutcome], [StartSpan], [EndSpan]: the outcome of a write on
//     the request's server span (which server.TraceRequests starts) and
//     child spans for its steps, on the span's own TracerProvider: the
//     framework installs no global provider. [TraceLogHandler] puts trace
//     and span IDs on log records.
//   - [RequestLogHandler]: the level of the events each request logs
//     (framework.EngineConfig's RequestLogLevel); failures keep their own.
//   - [KeyHash]: the SHA-256 that logs, spans, audit rows and the admin
//     tool carry instead of an idempotency key.
//   - [ClientGone]: a request whose client went away is outcome
//     client_gone and logged at Info, never a server error; the request
//     deadline (server.Deadline) running out stays a 503.
//
// It depends on no other package of the framework, so that the core
// (package framework, whose Engine holds the metrics), the HTTP plumbing
// (framework/server) and both patterns report through it.
package telemetry
