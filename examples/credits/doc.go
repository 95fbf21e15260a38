// Command credits is a small complete service on retrysafe's POST
// fallback, to copy: it opens its own database (SQLite by default,
// PostgreSQL when DATABASE_URL is set), applies the framework's migrations
// and its own table, declares POST /v1/credits in local mode with its own
// business rejection code insufficient_funds, and serves it on a plain gin
// router with the framework's authentication and problem+json 404/405.
//
//	go run ./examples/credits
//	curl -i -X POST localhost:8081/v1/credits -H 'Authorization: Bearer sk_test_acme' \
//	  -H 'Idempotency-Key: credit-1' -H 'Content-Type: application/json' -d '{"account":"alice","amount":500}'
package main
