package tests

import (
	"net/http"
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
			for i := 0; b.Loop(); i++ {
				rec := serveInProcess(h, http.MethodPost, "/v1/payments", body, "Idempotency-Key", "bench-"+strconv.Itoa(i))
				if rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
