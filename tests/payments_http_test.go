package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

func paymentBody(amount int, method string) []byte {
	return fmt.Appendf(nil, `{"amount":%d,"currency":"usd","customer":"cus_8812","description":"Order 1042","payment_method":%q}`, amount, method)
}

// pay sends POST /v1/payments with the key as Idempotency-Key.
func (e *env) pay(token, key string, body []byte) response {
	e.t.Helper()
	return e.do(http.MethodPost, "/v1/payments", token, body, "Idempotency-Key", key)
}

// sandboxCharge is one element of GET /v1/sandbox/charges.
type sandboxCharge struct {
	ID            string `json:"id"`
	Amount        int64  `json:"amount"`
	DownstreamKey string `json:"downstream_key"`
	Status        string `json:"status"`
}

// charges lists the tenant's sandbox charges through the API; status
// "succeeded" keeps only money actually moved.
func (e *env) charges(token, status string) []sandboxCharge {
	e.t.Helper()
	path := "/v1/sandbox/charges"
	if status != "" {
		path += "?status=" + status
	}
	r := e.do(http.MethodGet, path, token, nil)
	wantStatus(e.t, r, http.StatusOK)
	var list []sandboxCharge
	if err := json.Unmarshal(r.Body, &list); err != nil {
		e.t.Fatalf("charges: %v: %s", err, r.Body)
	}
	return list
}

// payment reads a payment row.
type paymentRow struct {
	Status           string
	Amount           int64
	ProviderChargeID *string
	DownstreamKey    string
}

func (e *env) paymentRow(tenant, id string) paymentRow {
	e.t.Helper()
	var r paymentRow
	if err := e.app.DB.Gorm.Table("payments").Select("status, amount, provider_charge_id, downstream_key").
		Where("tenant_id = ? AND id = ?", tenant, id).Take(&r).Error; err != nil {
		e.t.Fatalf("read payment %s: %v", id, err)
	}
	return r
}

func TestPaymentCreateAndReplay(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		first := e.pay(tokenAcme, "order-1042", paymentBody(4200, "pm_card_visa"))
		wantStatus(t, first, http.StatusCreated)
		if first.Header.Get("Idempotency-Key") != "order-1042" || first.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first response headers: %v", first.Header)
		}
		p := first.JSON(t)
		id, _ := p["id"].(string)
		charge, _ := p["provider_charge_id"].(string)
		if !strings.HasPrefix(id, "pay_") || p["status"] != "succeeded" || p["amount"] != float64(4200) ||
			p["currency"] != "usd" || p["customer"] != "cus_8812" || !strings.HasPrefix(charge, "ch_") {
			t.Fatalf("representation = %s", first.Body)
		}
		if loc := first.Header.Get("Location"); loc != "/v1/payments/"+id {
			t.Fatalf("Location = %q", loc)
		}
		row := e.paymentRow("acme", id)
		if row.Status != "succeeded" || row.ProviderChargeID == nil || *row.ProviderChargeID != charge {
			t.Fatalf("stored payment = %+v", row)
		}

		// The same command: keys reordered, the amount spelled 4.2e3.
		retry := e.pay(tokenAcme, "order-1042",
			[]byte(`{"payment_method":"pm_card_visa","description":"Order 1042","customer":"cus_8812","currency":"usd","amount":4.2e3}`))
		wantReplay(t, retry, first)
		// payment_method left to its default is the same command too.
		wantReplay(t, e.pay(tokenAcme, "order-1042",
			[]byte(`{"amount":4200.0,"currency":"usd","customer":"cus_8812","description":"Order 1042"}`)), first)

		got := e.do(http.MethodGet, "/v1/payments/"+id, tokenAcme, nil)
		wantStatus(t, got, http.StatusOK)
		if g := got.JSON(t); g["id"] != id || g["status"] != "succeeded" || g["provider_charge_id"] != charge {
			t.Fatalf("GET = %s", got.Body)
		}
		if charges := e.charges(tokenAcme, ""); len(charges) != 1 || charges[0].ID != charge || charges[0].Amount != 4200 {
			t.Fatalf("sandbox charges = %+v, want exactly %s", charges, charge)
		}
		if n := e.count("payments", "tenant_id = ?", "acme"); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
	})
}

func TestPaymentKeyReuseWithDifferentCommand(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		wantStatus(t, e.pay(tokenAcme, "k-reuse", paymentBody(4200, "pm_card_visa")), http.StatusCreated)
		for _, body := range [][]byte{
			paymentBody(4201, "pm_card_visa"),
			paymentBody(4200, "pm_card_declined"),
			[]byte(`{"amount":4200,"currency":"usd","customer":"cus_8812","payment_method":"pm_card_visa"}`),
		} {
			r := e.pay(tokenAcme, "k-reuse", body)
			wantStatus(t, r, http.StatusUnprocessableEntity)
			if code := r.Code(t); code != "idempotency_key_reuse" {
				t.Fatalf("code = %q", code)
			}
		}
		if n := len(e.charges(tokenAcme, "")); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
		if n := e.count("payments", ""); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
	})
}

func TestPaymentSameKeyOtherTenantIsIndependent(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		a := e.pay(tokenAcme, "shared-key", paymentBody(4200, "pm_card_visa"))
		wantStatus(t, a, http.StatusCreated)
		g := e.pay(tokenGlobex, "shared-key", paymentBody(4200, "pm_card_visa"))
		wantStatus(t, g, http.StatusCreated)
		if g.Header.Get("Idempotent-Replayed") != "" || bytes.Equal(a.Body, g.Body) {
			t.Fatalf("globex got acme's response: %s", g.Body)
		}
		aID, gID := a.JSON(t)["id"].(string), g.JSON(t)["id"].(string)
		if aID == gID {
			t.Fatalf("both tenants got payment %s", aID)
		}
		// A different command is no key reuse across tenants either.
		wantStatus(t, e.pay(tokenGlobex, "other-key", paymentBody(1, "pm_card_visa")), http.StatusCreated)
		wantStatus(t, e.do(http.MethodGet, "/v1/payments/"+aID, tokenGlobex, nil), http.StatusNotFound)
		wantStatus(t, e.do(http.MethodGet, "/v1/payments/"+gID, tokenAcme, nil), http.StatusNotFound)
		if n := len(e.charges(tokenAcme, "")); n != 1 {
			t.Fatalf("acme has %d charges, want 1", n)
		}
		if n := len(e.charges(tokenGlobex, "")); n != 2 {
			t.Fatalf("globex has %d charges, want 2", n)
		}
	})
}

func TestPaymentDeclinedIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		first := e.pay(tokenAcme, "k-declined", paymentBody(4200, "pm_card_declined"))
		wantStatus(t, first, http.StatusPaymentRequired)
		if code := first.Code(t); code != "card_declined" {
			t.Fatalf("code = %q", code)
		}
		if first.Header.Get("Idempotency-Key") != "k-declined" {
			t.Fatalf("key not echoed: %v", first.Header)
		}
		wantReplay(t, e.pay(tokenAcme, "k-declined", paymentBody(4200, "pm_card_declined")), first)
		charges := e.charges(tokenAcme, "")
		if len(charges) != 1 || charges[0].Status != "failed" {
			t.Fatalf("sandbox ledger = %+v, want one declined attempt", charges)
		}
		if n := len(e.charges(tokenAcme, "succeeded")); n != 0 {
			t.Fatalf("%d succeeded charges, want 0", n)
		}
		if n := e.count("payments", "status = ?", "failed"); n != 1 {
			t.Fatalf("%d failed payments, want 1", n)
		}
	})
}

func TestPaymentTimeoutAfterChargeChargesOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, losesAnswersQuickly)
		// The sandbox charges, then loses its first answer: the provider call
		// times out, the record is left unknown and the client is told so.
		first := e.pay(tokenAcme, "k-timeout", paymentBody(4200, "pm_card_timeout_after_charge"))
		wantStatus(t, first, http.StatusConflict)
		if code := first.Code(t); code != "outcome_pending" || first.Header.Get("Retry-After") == "" {
			t.Fatalf("first answer %s (Retry-After %q), want outcome_pending with Retry-After", first.Body, first.Header.Get("Retry-After"))
		}
		if n := e.count(idempotencyTable, "state = ?", "unknown"); n != 1 {
			t.Fatalf("%d unknown records, want 1", n)
		}
		if n := e.count("payments", "status = ?", "pending"); n != 1 {
			t.Fatalf("%d pending payments, want 1", n)
		}
		if n := len(e.charges(tokenAcme, "")); n != 1 {
			t.Fatalf("%d charges after the lost answer, want 1", n)
		}
		// The retry reconciles through the downstream key: the one charge.
		final := e.pay(tokenAcme, "k-timeout", paymentBody(4200, "pm_card_timeout_after_charge"))
		wantStatus(t, final, http.StatusCreated)
		if final.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the reconciled answer is marked replayed: %v", final.Header)
		}
		p := final.JSON(t)
		charges := e.charges(tokenAcme, "")
		if len(charges) != 1 || p["provider_charge_id"] != charges[0].ID || p["status"] != "succeeded" {
			t.Fatalf("payment %s; sandbox charges %+v: want the one charge", final.Body, charges)
		}
		wantReplay(t, e.pay(tokenAcme, "k-timeout", paymentBody(4200, "pm_card_timeout_after_charge")), final)
		if n := len(e.charges(tokenAcme, "")); n != 1 {
			t.Fatalf("%d charges after the replay, want 1", n)
		}
	})
}

func TestPaymentKeyMissingOrInvalidStoresNothing(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		missing := e.do(http.MethodPost, "/v1/payments", tokenAcme, paymentBody(4200, "pm_card_visa"))
		wantStatus(t, missing, http.StatusBadRequest)
		if code := missing.Code(t); code != "idempotency_key_missing" {
			t.Fatalf("code = %q", code)
		}
		for _, headers := range [][]string{
			{"Idempotency-Key", ""},
			{"Idempotency-Key", "has space"},
			{"Idempotency-Key", strings.Repeat("k", 256)},
			{"Idempotency-Key", "a", "X-Idempotency-Key", "b"},
		} {
			r := e.do(http.MethodPost, "/v1/payments", tokenAcme, paymentBody(4200, "pm_card_visa"), headers...)
			wantStatus(t, r, http.StatusBadRequest)
			if code := r.Code(t); code != "idempotency_key_invalid" {
				t.Fatalf("headers %q: code = %q", headers, code)
			}
		}
		unauth := e.do(http.MethodPost, "/v1/payments", "", paymentBody(4200, "pm_card_visa"), "Idempotency-Key", "k-1")
		wantStatus(t, unauth, http.StatusUnauthorized)
		e.wantNothingStored()
	})
}

// wantNothingStored checks that no payment, charge or idempotency record
// exists.
func (e *env) wantNothingStored() {
	e.t.Helper()
	if n := e.count("payments", ""); n != 0 {
		e.t.Fatalf("%d payments stored, want 0", n)
	}
	if n := e.count("sandbox_charges", ""); n != 0 {
		e.t.Fatalf("%d charges, want 0", n)
	}
	if n := e.count(idempotencyTable, ""); n != 0 {
		e.t.Fatalf("%d idempotency records, want 0", n)
	}
}

func TestPaymentValidationStoresNothingAndKeyStaysUsable(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		for _, body := range []string{
			`{"amount":0,"currency":"usd","customer":"cus_8812"}`,
			`{"amount":100000000,"currency":"usd","customer":"cus_8812"}`,
			`{"amount":42.5,"currency":"usd","customer":"cus_8812"}`,
			`{"amount":"4200","currency":"usd","customer":"cus_8812"}`,
			`{"amount":4200,"currency":"xyz","customer":"cus_8812"}`,
			`{"amount":4200,"currency":"usd"}`,
			`{"amount":4200,"currency":"usd","customer":"cus_8812","description":"` + strings.Repeat("d", 501) + `"}`,
			`{"amount":4200,"currency":"usd","customer":"cus_8812","payment_method":"pm_card_bogus"}`,
			`{"amount":4200,"currency":"usd","customer":"cus_8812","capture":false}`,
		} {
			r := e.pay(tokenAcme, "k-fix-me", []byte(body))
			wantStatus(t, r, http.StatusBadRequest)
			if code := r.Code(t); code != "validation_failed" {
				t.Fatalf("%s: code = %q", body, code)
			}
		}
		for _, body := range []string{`{"amount":1,"amount":2}`, `{"amount":`, "\xff"} {
			r := e.pay(tokenAcme, "k-fix-me", []byte(body))
			wantStatus(t, r, http.StatusBadRequest)
			if code := r.Code(t); code != "malformed_json" {
				t.Fatalf("%q: code = %q", body, code)
			}
		}
		e.wantNothingStored()
		fixed := e.pay(tokenAcme, "k-fix-me", paymentBody(4200, "pm_card_visa"))
		wantStatus(t, fixed, http.StatusCreated)
		if fixed.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("the fixed request was replayed: %v", fixed.Header)
		}
		// Uppercase currency is the same currency.
		wantReplay(t, e.pay(tokenAcme, "k-fix-me",
			[]byte(`{"amount":4200,"currency":"USD","customer":"cus_8812","description":"Order 1042"}`)), fixed)
	})
}

func TestPaymentKeyExpires(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		first := e.pay(tokenAcme, "k-expiry", paymentBody(4200, "pm_card_visa"))
		wantStatus(t, first, http.StatusCreated)
		e.clock.Advance(23 * time.Hour)
		wantReplay(t, e.pay(tokenAcme, "k-expiry", paymentBody(4200, "pm_card_visa")), first)
		e.clock.Advance(time.Hour + time.Minute)
		again := e.pay(tokenAcme, "k-expiry", paymentBody(4200, "pm_card_visa"))
		wantStatus(t, again, http.StatusCreated)
		if again.Header.Get("Idempotent-Replayed") != "" || again.JSON(t)["id"] == first.JSON(t)["id"] {
			t.Fatalf("after expiry the key was replayed: %s", again.Body)
		}
		if again.JSON(t)["provider_charge_id"] == first.JSON(t)["provider_charge_id"] {
			t.Fatalf("the new execution reused the old charge")
		}
		if n := len(e.charges(tokenAcme, "")); n != 2 {
			t.Fatalf("%d charges, want 2 (one per execution)", n)
		}
		// Even a different command is a new execution once the key expired.
		e.clock.Advance(25 * time.Hour)
		wantStatus(t, e.pay(tokenAcme, "k-expiry", paymentBody(1, "pm_card_visa")), http.StatusCreated)
	})
}

func TestPaymentXIdempotencyKeyAlone(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		first := e.do(http.MethodPost, "/v1/payments", tokenAcme, paymentBody(4200, "pm_card_visa"), "X-Idempotency-Key", "k-alias")
		wantStatus(t, first, http.StatusCreated)
		if first.Header.Get("Idempotency-Key") != "k-alias" {
			t.Fatalf("Idempotency-Key not echoed: %v", first.Header)
		}
		// The canonical header with the same key is the same request.
		wantReplay(t, e.pay(tokenAcme, "k-alias", paymentBody(4200, "pm_card_visa")), first)
		// A Structured-Field string is unquoted.
		wantReplay(t, e.do(http.MethodPost, "/v1/payments", tokenAcme, paymentBody(4200, "pm_card_visa"), "Idempotency-Key", `"k-alias"`), first)
		if n := len(e.charges(tokenAcme, "")); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

func TestPaymentGet(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		wantStatus(t, e.do(http.MethodGet, "/v1/payments/pay_000000000000000000000000", tokenAcme, nil), http.StatusNotFound)
		wantStatus(t, e.do(http.MethodGet, "/v1/payments/pay_000000000000000000000000", "", nil), http.StatusUnauthorized)
		declined := e.pay(tokenAcme, "k-get", paymentBody(99, "pm_card_declined"))
		wantStatus(t, declined, http.StatusPaymentRequired)
		var list []map[string]any
		_ = json.Unmarshal(e.do(http.MethodGet, "/v1/sandbox/charges", tokenAcme, nil).Body, &list)
		if len(list) != 1 {
			t.Fatalf("charges = %v", list)
		}
		var id string
		if err := e.app.DB.Gorm.Table("payments").Select("id").Where("tenant_id = ?", "acme").Take(&id).Error; err != nil {
			t.Fatal(err)
		}
		got := e.do(http.MethodGet, "/v1/payments/"+id, tokenAcme, nil)
		wantStatus(t, got, http.StatusOK)
		if p := got.JSON(t); p["status"] != "failed" || p["failure_code"] != "card_declined" || p["provider_charge_id"] != list[0]["id"] {
			t.Fatalf("GET declined payment = %s", got.Body)
		}
	})
}
