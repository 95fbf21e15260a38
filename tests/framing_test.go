package tests

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/internal/rawhttp"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestSmuggledPaymentIsNeverCharged sends POST /v1/payments over raw TCP
// with both Content-Length and Transfer-Encoding and a second payment
// hidden after its body as the demo's server frames it (CL.TE either
// way round, and TE.CL on HTTP/1.0): the first is answered with
// Connection: close, the connection is closed, and the hidden payment is
// never charged or recorded. Before, the demo charged both.
func TestSmuggledPaymentIsNeverCharged(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		addr := e.serveAsTheDemo(server.Config{})
		body := string(paymentBody(4200, "pm_card_visa"))
		smuggled := fmt.Sprintf("POST /v1/payments HTTP/1.1\r\nHost: demo\r\nAuthorization: Bearer %s\r\nIdempotency-Key: smuggled\r\n"+
			"Content-Type: application/json\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", tokenAcme, len(body), body)
		names := []string{"CL.TE", "CL.TE, Transfer-Encoding first", "TE.CL, HTTP/1.0"}
		for i, name := range names {
			ways := rawhttp.Smuggling("/v1/payments", fmt.Sprintf("Authorization: Bearer %s\r\nIdempotency-Key: first-%d\r\n", tokenAcme, i), body, smuggled)
			if len(ways) != len(names) {
				t.Fatalf("rawhttp.Smuggling has %d ways, the test sends %d", len(ways), len(names))
			}
			got := rawhttp.Exchange(t, addr, ways[name])
			if len(got) != 1 {
				t.Fatalf("%s: %d answers on the connection, want 1: the hidden payment ran", name, len(got))
			}
			if !got[0].Close {
				t.Fatalf("%s: the answer (%d) keeps the connection open", name, got[0].Status)
			}
			// Framed by chunks, the first is a payment; on HTTP/1.0 its
			// body is the chunk size line.
			if want := map[bool]int{true: http.StatusBadRequest, false: http.StatusCreated}[name == "TE.CL, HTTP/1.0"]; got[0].Status != want {
				t.Fatalf("%s: %d %s, want %d", name, got[0].Status, got[0].Body, want)
			}
		}
		if n := e.count("idempotency_records", "idem_key = ?", "smuggled"); n != 0 {
			t.Fatalf("the hidden payment has a record")
		}
		e.wantRows(map[string]int64{"payments": 2, "sandbox_charges": 2, "idempotency_records": 2})
	})
}

// TestRepeatedSingletonFieldsAre400: Authorization, Idempotency-Key,
// If-Match or Content-Type sent twice with different values is 400 on
// every route of the demo as its server serves it, before any tenant is
// chosen: nothing is read for either tenant, nothing charged, stored or
// transferred. Before, the first Authorization won (globex's then acme's
// token read as globex: 404; the other way round: 200).
func TestRepeatedSingletonFieldsAre400(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		base := "http://" + e.serveAsTheDemo(server.Config{})
		id := uuid.New()
		created := e.doAt(base, http.MethodPut, orderPath(id), tokenAcme, orderBody(1, "1.00"))
		wantStatus(t, created, http.StatusCreated)
		globex, acme := "Bearer "+tokenGlobex, "Bearer "+tokenAcme
		fresh := uuid.New()
		for _, c := range []struct {
			method, path, token string
			body                []byte
			headers             []string
			code                string
		}{
			{http.MethodGet, orderPath(id), tokenGlobex, nil, []string{"Authorization", acme}, "validation_failed"},
			{http.MethodGet, orderPath(id), tokenAcme, nil, []string{"Authorization", globex}, "validation_failed"},
			{http.MethodGet, "/healthz", tokenAcme, nil, []string{"Authorization", globex}, "validation_failed"},
			{http.MethodGet, "/v1/no-such-route", tokenAcme, nil, []string{"Authorization", globex}, "validation_failed"},
			{http.MethodPost, "/v1/payments", tokenGlobex, paymentBody(4200, "pm_card_visa"), []string{"Authorization", acme, "Idempotency-Key", "pay-1"}, "validation_failed"},
			{http.MethodPost, "/v1/payments", tokenAcme, paymentBody(4200, "pm_card_visa"), []string{"Idempotency-Key", "pay-2", "Idempotency-Key", "pay-3"}, "idempotency_key_invalid"},
			{http.MethodPost, "/v1/transfers", tokenAcme, transferBody("a", "b", 5, "EUR"), []string{"Idempotency-Key", "tr-1", "X-Idempotency-Key", "tr-2", "X-Idempotency-Key", "tr-3"}, "idempotency_key_invalid"},
			{http.MethodPut, orderPath(fresh), tokenAcme, orderBody(2, "1.00"), []string{"If-Match", `"1"`, "If-Match", `"2"`}, "validation_failed"},
			{http.MethodPut, orderPath(fresh), tokenAcme, orderBody(2, "1.00"), []string{"Content-Type", "text/plain"}, "validation_failed"},
			{http.MethodPatch, orderPath(id), tokenAcme, []byte(`{"customer":"mallory"}`), []string{"Content-Type", "application/merge-patch+json"}, "validation_failed"},
		} {
			r := e.doAt(base, c.method, c.path, c.token, c.body, c.headers...)
			if r.Status != http.StatusBadRequest || r.Code(t) != c.code {
				t.Fatalf("%s %s with %q: %d %s, want 400 %s", c.method, c.path, c.headers, r.Status, r.Body, c.code)
			}
		}
		if got := e.doAt(base, http.MethodGet, orderPath(id), tokenAcme, nil); got.Status != http.StatusOK || string(got.Body) != string(created.Body) {
			t.Fatalf("the order changed: %d %s", got.Status, got.Body)
		}
		e.wantRows(map[string]int64{"orders": 1, "payments": 0, "sandbox_charges": 0, "transfers": 0, "idempotency_records": 0})
	})
}
