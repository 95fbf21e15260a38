package tests

import (
	"context"
	"fmt"
	"net/http"
	"testing"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// transferBench is the demo app in process (no sockets) for the transfer
// benchmarks; on PostgreSQL it sits in a database of its own so that the
// benchmark can report commits/op.
type transferBench struct {
	app   *app.App
	meter *commitMeter
}

func newTransferBench(b *testing.B, dialect string) *transferBench {
	b.Helper()
	tb := &transferBench{}
	dsn := testdb.New(b, dialect)
	if dialect == "postgres" {
		tb.meter = newCommitMeter(b)
		dsn = tb.meter.DSN
	}
	a, err := app.New(context.Background(), app.Config{DSN: dsn})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	tb.app = a
	if tb.meter != nil {
		tb.meter.quiet(a)
	}
	return tb
}

func (tb *transferBench) post(b *testing.B, key string, body []byte, replayed bool) {
	rec := serveInProcess(tb.app.Handler(), http.MethodPost, "/v1/transfers", body, "Idempotency-Key", key)
	if rec.Code != http.StatusCreated || (rec.Header().Get("Idempotent-Replayed") == "true") != replayed {
		b.Fatalf("POST /v1/transfers: %d %v %s", rec.Code, rec.Header(), rec.Body)
	}
}

// run measures loop and, on PostgreSQL, reports the commits it cost.
func (tb *transferBench) run(b *testing.B, loop func()) {
	var before int64
	if tb.meter != nil {
		before = tb.meter.commits(tb.app)
	}
	b.ReportAllocs()
	loop()
	if tb.meter != nil {
		b.ReportMetric(float64(tb.meter.commits(tb.app)-before)/float64(b.N), "commits/op")
	}
}

// BenchmarkTransferCreate measures a new transfer: bind, fingerprint, the
// claim, two relative balance updates, the transfer row and the completion
// in one transaction.
func BenchmarkTransferCreate(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			tb := newTransferBench(b, dialect)
			body := transferBody("acc_a", "acc_b", 1, "EUR")
			tb.run(b, func() {
				i := 0
				for b.Loop() {
					i++
					tb.post(b, fmt.Sprintf("bench-%d", i), body, false)
				}
			})
		})
	}
}

// BenchmarkTransferReplay measures a retried transfer: the claim finds the
// completed record and its stored response is replayed.
func BenchmarkTransferReplay(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			tb := newTransferBench(b, dialect)
			body := transferBody("acc_a", "acc_b", 1, "EUR")
			tb.post(b, "bench-replay", body, false)
			tb.run(b, func() {
				defer reportCPU(b)()
				for b.Loop() {
					tb.post(b, "bench-replay", body, true)
				}
			})
		})
	}
}
