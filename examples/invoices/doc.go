// Command invoices is a small complete service on retrysafe's POST
// fallback in phased mode, to copy when an operation calls a third party
// that assigns the ID: its own gorm models and *gorm.DB (SQLite by
// default, PostgreSQL when DATABASE_URL is set), the framework's
// migrations and its own, a plain gin router, and two operations that
// call a billing service (a stand-in in the same database, billing.go):
//
//   - POST /v1/invoices issues an invoice at the billing service, which
//     assigns its ID (in_…);
//   - POST /v1/invoices/{id}/emails has the billing service email it; the
//     invoice comes from the path (postkeys.Run.PathParams), which is part
//     of the fingerprint.
//
// Each commits its pending row in a first phase (the recovery point
// "recorded"), calls the billing service with a downstream key derived
// from the idempotency key, and commits the answer with the stored
// response ("done"). An answer lost after the call leaves the record
// unknown (409 outcome_pending); a retry with the same key, or the
// recovery worker, reconciles it by looking the key up at the billing
// service: one invoice, one email, however often the client retries.
//
//	go run ./examples/invoices
//	curl -i -X POST localhost:8082/v1/invoices -H 'Authorization: Bearer sk_test_acme' \
//	  -H 'Idempotency-Key: invoice-1' -H 'Content-Type: application/json' \
//	  -d '{"customer":"cus_1","amount":4200,"currency":"EUR"}'
//	curl -i -X POST localhost:8082/v1/invoices/inv_…/emails -H 'Authorization: Bearer sk_test_acme' \
//	  -H 'Idempotency-Key: invoice-1-email-1' -H 'Content-Type: application/json' -d '{"to":"ada@example.com"}'
package main
