package tests

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strconv"
	"testing"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// BenchmarkPaymentCreate measures one fresh payment through the router:
// auth, bind, claim, the payment-created phase, the sandbox charge (its own
// insert), the charged phase and the stored response.
//
//	go test ./tests -run '^$' -bench BenchmarkPaymentCreate -benchtime 2s
//	TEST_DATABASE_URL=… go test ./tests -run '^$' -bench BenchmarkPaymentCreate
func BenchmarkPaymentCreate(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			e := newEnv(b, testdb.New(b, dialect))
			h := e.app.Handler()
			body := paymentBody(4200, "pm_card_visa")
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; b.Loop(); i++ {
				req := httptest.NewRequest(http.MethodPost, "/v1/payments", bytes.NewReader(body))
				req.Header.Set("Authorization", "Bearer "+tokenAcme)
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Idempotency-Key", "bench-"+strconv.Itoa(i))
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
