package tests

import (
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestTextTheDatabaseCannotStoreIs400: NUL and invalid UTF-8 in a path
// parameter, a query value or any string of a body are answered 400 on both
// dialects (PostgreSQL answered them SQLSTATE 22021 and so 500), and
// nothing is stored.
func TestTextTheDatabaseCannotStoreIs400(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		for _, tc := range []struct {
			method, path string
			body         []byte
			code         string
		}{
			{"GET", "/v1/payments/pay_%00", nil, "invalid_resource_id"},
			{"GET", "/v1/payments/pay_%FF", nil, "invalid_resource_id"},
			{"GET", "/v1/payments/pay_%C3%28", nil, "invalid_resource_id"},
			{"GET", "/v1/accounts/acc%00", nil, "invalid_resource_id"},
			{"GET", "/v1/accounts/acc%FF", nil, "invalid_resource_id"},
			{"PUT", "/v1/orders/%00", orderBody(1, "1.00"), "invalid_resource_id"},
			{"GET", "/v1/orders?cursor=%00", nil, "validation_failed"},
			{"GET", "/v1/orders?status=%FF", nil, "validation_failed"},
			{"POST", "/v1/payments", []byte(`{"amount":4200,"currency":"usd","customer":"cus_\u0000"}`), "validation_failed"},
			{"POST", "/v1/payments", []byte(`{"amount":4200,"currency":"usd","customer":"c","description":"a\u0000b"}`), "validation_failed"},
			{"POST", "/v1/transfers", []byte(`{"from_account":"acc_a\u0000","to_account":"acc_b","amount":5,"currency":"EUR"}`), "validation_failed"},
			{"PUT", orderPath(uuid.New()), []byte(`{"customer":"c\u0000","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`), "validation_failed"},
			{"PUT", orderPath(uuid.New()), []byte(`{"customer":"c","currency":"EUR","items":[{"sku":"s\u0000","quantity":1,"unit_price":"1"}]}`), "validation_failed"},
			{"POST", "/v1/orders", []byte(`{"customer":"c","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}],"note":"\u0000"}`), "validation_failed"},
		} {
			r := e.do(tc.method, tc.path, tokenAcme, tc.body, "Idempotency-Key", "hostile-"+uuid.NewString())
			if r.Status != http.StatusBadRequest || r.Code(t) != tc.code {
				t.Errorf("%s %s %s: %d %s, want 400 %s", tc.method, tc.path, tc.body, r.Status, r.Body, tc.code)
			}
		}
		for _, table := range []string{"orders", "payments", "transfers", "idempotency_records", "sandbox_charges"} {
			if n := e.count(table, ""); n != 0 {
				t.Errorf("%s has %d rows after requests that were all refused", table, n)
			}
		}
	})
}
