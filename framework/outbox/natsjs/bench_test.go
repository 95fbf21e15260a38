package natsjs_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// BenchmarkRelayThroughput measures one relay draining a backlog of b.N
// events (over 100 aggregates) to JetStream, each acked by the stream:
// events/s is the relay's throughput.
func BenchmarkRelayThroughput(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			db, _, pub := setupBench(b, dialect)
			for i := 0; i < b.N; i++ {
				emit(b, db, "acme", fmt.Sprintf("agg%03d", i%100))
			}
			relay, err := outbox.NewRelay(db, pub, outbox.Config{BatchSize: 500})
			if err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			start := time.Now()
			st, err := relay.Drain(context.Background())
			elapsed := time.Since(start)
			b.StopTimer()
			if err != nil || st.Published != b.N {
				b.Fatalf("drain: %+v %v", st, err)
			}
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "events/s")
		})
	}
}
