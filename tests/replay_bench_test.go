package tests

import (
	"net/http"
	"strconv"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// Benchmarks of the reads and replays of both patterns through the demo
// router in process (no sockets), beside BenchmarkPutCreate,
// BenchmarkPutReplay, BenchmarkTransferCreate, BenchmarkTransferReplay and
// BenchmarkPaymentCreate, so that a regression of any hot path shows in
// review:
//
//	go test ./tests -run '^$' -bench . -benchtime 2000x
//	TEST_DATABASE_URL=… go test ./tests -run '^$' -bench . -benchtime 2000x

// BenchmarkGet measures GET /v1/orders/{id}: one indexed read and a render.
func BenchmarkGet(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			h := benchApp(b, dialect)
			path := orderPath(uuid.New())
			serve(b, h, http.MethodPut, path, orderBody(2, "10.00"), http.StatusCreated)
			b.ReportAllocs()
			for b.Loop() {
				serve(b, h, http.MethodGet, path, nil, http.StatusOK)
			}
		})
	}
}

// BenchmarkLegacyPostCreate measures POST /v1/orders with a new key: the
// PUT engine behind the key-derived ID.
func BenchmarkLegacyPostCreate(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			h := benchApp(b, dialect)
			body := orderBody(2, "10.00")
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				if rec := serveInProcess(h, http.MethodPost, "/v1/orders", body, "Idempotency-Key", "bench-"+strconv.Itoa(i)); rec.Code != http.StatusCreated {
					b.Fatalf("status %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}

// BenchmarkLegacyPostReplay measures a retried legacy POST.
func BenchmarkLegacyPostReplay(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			h := benchApp(b, dialect)
			body := orderBody(2, "10.00")
			if rec := serveInProcess(h, http.MethodPost, "/v1/orders", body, "Idempotency-Key", "bench"); rec.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				rec := serveInProcess(h, http.MethodPost, "/v1/orders", body, "Idempotency-Key", "bench")
				if rec.Code != http.StatusCreated || rec.Header().Get("Idempotent-Replayed") != "true" {
					b.Fatalf("status %d %v: %s", rec.Code, rec.Header(), rec.Body)
				}
			}
		})
	}
}

// BenchmarkPaymentReplay measures a retried payment: the stored response
// of a completed record, replayed byte for byte.
func BenchmarkPaymentReplay(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			e := newEnv(b, testdb.New(b, dialect))
			h := e.app.Handler()
			body := paymentBody(4200, "pm_card_visa")
			if rec := serveInProcess(h, http.MethodPost, "/v1/payments", body, "Idempotency-Key", "bench"); rec.Code != http.StatusCreated {
				b.Fatalf("status %d: %s", rec.Code, rec.Body)
			}
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				rec := serveInProcess(h, http.MethodPost, "/v1/payments", body, "Idempotency-Key", "bench")
				if rec.Code != http.StatusCreated || rec.Header().Get("Idempotent-Replayed") != "true" {
					b.Fatalf("status %d %v: %s", rec.Code, rec.Header(), rec.Body)
				}
			}
		})
	}
}
