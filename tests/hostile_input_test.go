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
		e.wantRows(map[string]int64{"orders": 0, "payments": 0, "transfers": 0, "idempotency_records": 0, "sandbox_charges": 0})
	})
}

// TestMemberNamesBindExactly: a body member whose name differs from a
// field's JSON name only in case or by a Unicode case fold (ſ U+017F for s,
// K U+212A for k) is 400 validation_failed naming it, on every route that
// binds a body (POST operations, PUT, the legacy POST) and every dialect,
// and nothing is stored: no payment, no charge, no transfer, no balance
// moved, no order. encoding/json bound such members case-insensitively
// (the last one won), while the duplicate-key check compares names
// exactly, so each of these was a 201 with the value no other reader of
// the body would see: charged 1, customer mallory, the visa card charged
// instead of a declined one, the victim debited, quantity 9.
func TestMemberNamesBindExactly(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		// Two accounts with a history, whose balances must not move.
		wantStatus(t, e.transfer(tokenAcme, "seed", transferBody("victim", "alice", 100, "EUR")), http.StatusCreated)
		item := `{"sku":"s","unit_price":"1","quantity":1,"QUANTITY":9}`
		for _, tc := range []struct {
			method, path, body, field string
		}{
			{"POST", "/v1/payments", `{"amount":100,"Amount":1,"currency":"usd","customer":"c","payment_method":"pm_card_visa"}`, "Amount"},
			{"POST", "/v1/payments", `{"amount":100,"currency":"usd","customer":"alice","cuſtomer":"mallory","payment_method":"pm_card_visa"}`, "cuſtomer"},
			{"POST", "/v1/payments", `{"amount":100,"currency":"usd","customer":"c","payment_method":"pm_card_declined","PAYMENT_METHOD":"pm_card_visa"}`, "PAYMENT_METHOD"},
			{"POST", "/v1/payments", `{"amount":100,"currency":"usd","customer":"c","payment_method":"pm_card_visa","description":"d","deſcription":"e"}`, "deſcription"},
			{"POST", "/v1/transfers", `{"from_account":"alice","to_account":"bob","amount":5,"currency":"EUR","FROM_ACCOUNT":"victim"}`, "FROM_ACCOUNT"},
			{"POST", "/v1/transfers", `{"from_account":"alice","to_account":"bob","amount":5,"Amount":500,"currency":"EUR"}`, "Amount"},
			{"PUT", orderPath(uuid.New()), `{"customer":"c","currency":"EUR","items":[` + item + `]}`, "items[0].QUANTITY"},
			{"PUT", orderPath(uuid.New()), `{"customer":"c","currency":"EUR","items":[{"sku":"a","quantity":1,"unit_price":"1"},{"sku":"b","quantity":1,"unit_price":"1","s\u212au":"x"}]}`, "items[1].s\u212au"},
			{"POST", "/v1/orders", `{"customer":"c","currency":"EUR","items":[` + item + `]}`, "items[0].QUANTITY"},
			{"POST", "/v1/orders", `{"customer":"c","currency":"EUR","Currency":"USD","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`, "Currency"},
		} {
			r := e.do(tc.method, tc.path, tokenAcme, []byte(tc.body), "Idempotency-Key", "fold-"+uuid.NewString())
			if r.Status != http.StatusBadRequest || r.Code(t) != "validation_failed" {
				t.Fatalf("%s %s %s: %d %s, want 400 validation_failed", tc.method, tc.path, tc.body, r.Status, r.Body)
			}
			if errs, _ := r.JSON(t)["errors"].([]any); len(errs) != 1 || errs[0].(map[string]any)["field"] != tc.field {
				t.Fatalf("%s %s %s: errors %s, want the one field %s", tc.method, tc.path, tc.body, r.Body, tc.field)
			}
		}
		// Only the seeded transfer, its record and its two accounts.
		e.wantRows(map[string]int64{"payments": 0, "sandbox_charges": 0, "orders": 0, "order_items": 0,
			"transfers": 1, "idempotency_records": 1, "accounts": 2})
		e.wantBalance(tokenAcme, "victim", -100)
		e.wantBalance(tokenAcme, "alice", 100)
	})
}

// TestUnpairedSurrogatesAre400: a string escape that is half a UTF-16
// surrogate pair is 400 malformed_json on every route that binds a body
// and every dialect (RFC 7493), and nothing is stored. encoding/json stored
// "c\ud800" as "c\ufffd", so that two different requests had one
// fingerprint and replayed each other.
func TestUnpairedSurrogatesAre400(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		for _, tc := range []struct{ method, path, body string }{
			{"POST", "/v1/payments", `{"amount":100,"currency":"usd","customer":"c\ud800","payment_method":"pm_card_visa"}`},
			{"POST", "/v1/payments", `{"amount":100,"currency":"usd","customer":"c","description":"\udc00","payment_method":"pm_card_visa"}`},
			{"POST", "/v1/transfers", `{"from_account":"a\udbff","to_account":"b","amount":5,"currency":"EUR"}`},
			{"PUT", orderPath(uuid.New()), `{"customer":"c","currency":"EUR","items":[{"sku":"s\ud83d","quantity":1,"unit_price":"1"}]}`},
			{"POST", "/v1/orders", `{"customer":"c","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}],"note":"\ude00\ud83d"}`},
		} {
			r := e.do(tc.method, tc.path, tokenAcme, []byte(tc.body), "Idempotency-Key", "surrogate-"+uuid.NewString())
			if r.Status != http.StatusBadRequest || r.Code(t) != "malformed_json" {
				t.Fatalf("%s %s %s: %d %s, want 400 malformed_json", tc.method, tc.path, tc.body, r.Status, r.Body)
			}
		}
		e.wantRows(map[string]int64{"payments": 0, "sandbox_charges": 0, "orders": 0, "order_items": 0,
			"transfers": 0, "accounts": 0, "idempotency_records": 0})
	})
}

// wantRows stops the test unless each table has the number of rows given.
func (e *env) wantRows(want map[string]int64) {
	e.t.Helper()
	for table, n := range want {
		if got := e.count(table, ""); got != n {
			e.t.Fatalf("%s has %d rows, want %d", table, got, n)
		}
	}
}
