package tests

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/internal/testnats"
)

// BenchmarkRelayLagUnderCreateLoad creates orders with PUT (4 clients at
// once) while the demo's relay publishes their order.created events to
// JetStream. It reports the create rate, the outbox lag (age of the oldest
// pending event, sampled every 10ms: the maximum and the mean) and how long
// the relay needed after the last create to publish everything.
func BenchmarkRelayLagUnderCreateLoad(b *testing.B) {
	srv := testnats.New(b)
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			a, err := app.New(context.Background(), app.Config{DSN: testdb.New(b, dialect),
				Events: app.EventsConfig{NATSURL: srv.URL, Stream: srv.Stream, SubjectPrefix: srv.SubjectPrefix,
					Durable: "bench_" + dialect, Relay: outbox.Config{PollInterval: 10 * time.Millisecond}}})
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { _ = a.Close() })
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if err := a.Start(ctx); err != nil {
				b.Fatal(err)
			}
			h := a.Handler()
			body := orderBody(2, "10.00")

			var (
				mu        sync.Mutex
				maxLag    time.Duration
				sumLag    time.Duration
				samples   int
				sampling  = make(chan struct{})
				samplerWG sync.WaitGroup
			)
			samplerWG.Add(1)
			go func() {
				defer samplerWG.Done()
				tick := time.NewTicker(10 * time.Millisecond)
				defer tick.Stop()
				for {
					select {
					case <-sampling:
						return
					case <-tick.C:
						lag, _, _, err := a.Events.Relay.Lag(ctx)
						if err == nil {
							mu.Lock()
							maxLag = max(maxLag, lag)
							sumLag += lag
							samples++
							mu.Unlock()
						}
					}
				}
			}()
			b.SetParallelism(2) // 2 cores × 2 = 4 clients
			start := time.Now()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					path := orderPath(uuid.New())
					// A client retries 409 request_in_progress (a lock wait
					// past the timeout on a loaded SQLite) with the same ID.
					for try := 0; ; try++ {
						rec := serveInProcess(h, http.MethodPut, path, body)
						if rec.Code == http.StatusCreated {
							break
						}
						if rec.Code != http.StatusConflict || try == 10 {
							b.Errorf("PUT: %d %s", rec.Code, rec.Body)
							return
						}
					}
				}
			})
			created := time.Since(start)
			last := time.Now()
			for {
				_, pending, _, err := a.Events.Relay.Lag(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if pending == 0 {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			drain := time.Since(last)
			close(sampling)
			samplerWG.Wait()
			b.StopTimer()
			mu.Lock()
			defer mu.Unlock()
			b.ReportMetric(float64(b.N)/created.Seconds(), "creates/s")
			b.ReportMetric(float64(maxLag.Milliseconds()), "max-lag-ms")
			if samples > 0 {
				b.ReportMetric(float64((sumLag / time.Duration(samples)).Milliseconds()), "mean-lag-ms")
			}
			b.ReportMetric(float64(drain.Milliseconds()), "drain-ms")
		})
	}
}
