// Command demo runs the retrysafe demo API: orders on the PUT pattern (and
// its legacy POST route), payments and transfers on the POST fallback.
//
//	go run ./cmd/demo                       # SQLite file retrysafe-demo.db, 127.0.0.1:8080
//	go run ./cmd/demo -addr 127.0.0.1:9090 -db postgres://postgres@127.0.0.1:5432/test
//	go run ./cmd/demo -addr 127.0.0.1:9090 -db mysql://root@127.0.0.1:3306/test
//
// DATABASE_URL is used when -db is absent; DEMO_API_TOKENS="tok:tenant,…"
// replaces the default tokens sk_test_acme (acme) and sk_test_globex (globex).
//
// Events: -nats nats://127.0.0.1:4222 (or NATS_URL) publishes the outbox to
// NATS JetStream and runs the ledger's durable consumer; without it the
// relay hands events to the ledger in process. OTEL_EXPORTER_OTLP_ENDPOINT
// exports traces with OTLP over HTTP; unset, nothing is traced.
//
// Limits (flags, with their defaults): -request-deadline 10s (a request the
// database does not answer in time is 503), -read-header-timeout 5s,
// -read-timeout 15s (headers and body), -write-timeout 15s, -idle-timeout
// 60s (keep-alive), -db-connect-timeout 5s and -db-statement-timeout 5s.
//
// The log (JSON on stderr, at info) has one event per request (a resource
// write, an idempotency record's transitions); -request-log-level debug
// (default info) leaves them out under load, and failures are logged
// whatever it says.
//
// Start-up: it listens at once and answers /healthz 200 and everything else
// 503 unavailable (Retry-After) until the database is connected and
// migrated, retried with backoff (startup.go). When the first attempt
// fails it prints "retrysafe demo waiting for the database …"; the line
// "retrysafe demo listening on http://…" is printed once it is ready to
// serve: its own /readyz, asked through its listener, answers 200.
//
// -lease, -recovery-interval and -pause-at are for fault tests (faults.go).
package main
