// Command customers is a complete service with one retry-safe resource of
// its own: a typed customers table (unique email per tenant, a list filter
// on email) served with PUT /v1/customers/{uuid} on a plain gin router.
//
//	go run ./examples/customers                        # SQLite file customers.db
//	DATABASE_URL=postgres://… go run ./examples/customers
//
// Then:
//
//	curl -X PUT localhost:8080/v1/customers/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f \
//	  -H 'Authorization: Bearer sk_test_acme' -H 'Content-Type: application/json' \
//	  -d '{"name":"Ada","email":"ada@example.com"}'
package main
