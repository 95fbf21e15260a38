package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// fuzzTables are every table a request of the demo can write.
var fuzzTables = []string{"orders", "order_items", "outbox_events", "accounts", "transfers", "payments", "sandbox_charges", "idempotency_records"}

// storedRejections are the 4xx answers that are meant to be stored (and
// replayed): business rejections and an outcome being reconciled.
var storedRejections = map[string]bool{"card_declined": true, "currency_mismatch": true, "outcome_pending": true}

var (
	fuzzMethods = []string{"GET", "PUT", "POST", "DELETE", "HEAD", "PATCH", "OPTIONS"}
	fuzzRoutes  = []string{"/v1/orders/", "/v1/orders", "/v1/payments", "/v1/payments/", "/v1/transfers", "/v1/accounts/", "/v1/sandbox/charges", "/readyz", "/healthz", ""}
	fuzzAuth    = []string{"Bearer " + tokenAcme, "Bearer " + tokenGlobex, "", "Bearer sk_wrong", "Basic " + tokenAcme}
	fuzzTypes   = []string{"application/json", "", "text/plain", "application/merge-patch+json"}
)

func pick[T any](list []T, i uint8) T { return list[int(i)%len(list)] }

// FuzzHandler sends random requests (method, path with NUL and invalid
// UTF-8, token, key, one more header, body) to the whole demo handler on
// every dialect under test and checks that none panics or answers 5xx, and
// that a 4xx stores nothing (counting the rows of every table), except the
// rejections the contract stores on purpose.
func FuzzHandler(f *testing.F) {
	var envs []*env
	for _, dialect := range testdb.Dialects() {
		// Short waits, so that a provider timeout or a lock wait does not
		// stall the fuzzer for seconds.
		envs = append(envs, newEnv(f, testdb.New(f, dialect), func(c *app.Config) {
			c.ProviderTimeout = 20 * time.Millisecond
			c.LockTimeout = 50 * time.Millisecond
			c.PostKeys.InProgressWait = 10 * time.Millisecond
		}))
	}
	order := `{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.00"}]}`
	f.Add(uint8(1), uint8(0), "6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f", uint8(0), "", uint8(0), "If-None-Match", "*", []byte(order))
	f.Add(uint8(2), uint8(2), "", uint8(0), "key-1", uint8(0), "", "", []byte(`{"amount":4200,"currency":"usd","customer":"cus_8812","payment_method":"pm_card_declined"}`))
	f.Add(uint8(2), uint8(4), "", uint8(0), "key-2", uint8(0), "X-Idempotency-Key", "key-3", []byte(`{"from_account":"acc_a","to_account":"acc_b","amount":5e2,"currency":"EUR"}`))
	f.Add(uint8(2), uint8(2), "", uint8(0), "key-4", uint8(0), "", "", []byte(`{"amount":4200,"currency":"usd","customer":"cus_\u0000"}`))
	f.Add(uint8(0), uint8(3), "pay_\x00", uint8(0), "", uint8(0), "", "", []byte(nil))
	f.Add(uint8(0), uint8(5), "acc\xff", uint8(1), "", uint8(0), "", "", []byte(nil))
	f.Add(uint8(0), uint8(1), "?limit=0&cursor=%00", uint8(0), "", uint8(0), "", "", []byte(nil))
	f.Add(uint8(1), uint8(0), "%C3%28", uint8(2), "", uint8(1), "Content-Length", "5", []byte("{\"a\":\xff}"))
	f.Add(uint8(2), uint8(1), "", uint8(0), "\"quoted\"", uint8(2), "", "", []byte(`{"customer":"c","currency":"EUR","items":[{"sku":"s","quantity":1e99999,"unit_price":"1"}]}`))
	f.Fuzz(func(t *testing.T, method, route uint8, suffix string, auth uint8, key string, ctype uint8, hname, hvalue string, body []byte) {
		target := pick(fuzzRoutes, route) + suffix
		for _, e := range envs {
			before := rowCounts(t, e)
			req := fuzzRequest(pick(fuzzMethods, method), target, body)
			if a := pick(fuzzAuth, auth); a != "" {
				req.Header.Set("Authorization", a)
			}
			if ct := pick(fuzzTypes, ctype); ct != "" {
				req.Header.Set("Content-Type", ct)
			}
			if key != "" {
				req.Header.Set("Idempotency-Key", key)
			}
			if hname != "" {
				req.Header[hname] = append(req.Header[hname], hvalue)
			}
			rec := httptest.NewRecorder()
			e.app.Handler().ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %q → %d %s", req.Method, target, rec.Code, rec.Body)
			}
			if rec.Code >= 400 {
				var p struct{ Code string }
				_ = json.Unmarshal(rec.Body.Bytes(), &p)
				if !storedRejections[p.Code] {
					if after := rowCounts(t, e); after != before {
						t.Fatalf("%s %q → %d %s changed the rows: %v → %v", req.Method, target, rec.Code, rec.Body, before, after)
					}
				}
			}
		}
	})
}

// fuzzRequest builds a request for any target, however malformed: what a
// server would decode it to, or the raw bytes as the path.
func fuzzRequest(method, target string, body []byte) *http.Request {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		u = &url.URL{Path: target}
	}
	req := &http.Request{
		Method: method, URL: u, RequestURI: target, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{}, Host: "example.test", RemoteAddr: "192.0.2.1:1234",
		Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}
	return req
}

func rowCounts(t *testing.T, e *env) [8]int64 {
	t.Helper()
	var out [8]int64
	for i, table := range fuzzTables {
		if err := e.app.DB.Gorm.Table(table).Count(&out[i]).Error; err != nil {
			t.Fatalf("count %s: %v", table, err)
		}
	}
	return out
}
