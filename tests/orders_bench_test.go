package tests

import (
	"context"
	"net/http"
	"syscall"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// benchApp serves the demo router on a fresh database of dialect, in
// process (no sockets), so that the figures are the engine's and the
// database's.
func benchApp(b *testing.B, dialect string) http.Handler {
	return benchDemo(b, dialect).Handler()
}

func benchDemo(b *testing.B, dialect string) *app.App {
	b.Helper()
	a, err := app.New(context.Background(), app.Config{DSN: testdb.New(b, dialect)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = a.Close() })
	return a
}

// reportCPU starts counting the process's CPU time; the function it
// returns reports it per operation (cpu-µs/op), which, unlike ns/op, does
// not count the time spent waiting for the database.
func reportCPU(b *testing.B) func() {
	var r0 syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r0)
	return func() {
		var r1 syscall.Rusage
		_ = syscall.Getrusage(syscall.RUSAGE_SELF, &r1)
		ns := r1.Utime.Nano() + r1.Stime.Nano() - r0.Utime.Nano() - r0.Stime.Nano()
		b.ReportMetric(float64(ns)/1e3/float64(b.N), "cpu-µs/op")
	}
}

func serve(b *testing.B, h http.Handler, method, path string, body []byte, want int) {
	if rec := serveInProcess(h, method, path, body); rec.Code != want {
		b.Fatalf("%s %s: status %d, want %d: %s", method, path, rec.Code, want, rec.Body)
	}
}

// BenchmarkPutCreate measures a PUT that creates a new order: bind,
// fingerprint, INSERT … ON CONFLICT DO NOTHING, the order.created event and
// the commit.
func BenchmarkPutCreate(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			h := benchApp(b, dialect)
			body := orderBody(2, "10.00")
			b.ReportAllocs()
			for b.Loop() {
				serve(b, h, "PUT", orderPath(uuid.New()), body, http.StatusCreated)
			}
		})
	}
}

// BenchmarkPutReplay measures a retried PUT of an existing order within the
// replay window: nothing is written.
func BenchmarkPutReplay(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			a := benchDemo(b, dialect)
			h := a.Handler()
			body := orderBody(2, "10.00")
			path := orderPath(uuid.New())
			serve(b, h, "PUT", path, body, http.StatusCreated)
			// The replays on a connection that has served no write, as
			// on a replica's pool or in a pool that mostly replays.
			sqlDB := a.DB.SQL()
			sqlDB.SetMaxIdleConns(0)
			sqlDB.SetMaxIdleConns(2)
			b.ReportAllocs()
			defer reportCPU(b)()
			for b.Loop() {
				serve(b, h, "PUT", path, body, http.StatusCreated)
			}
		})
	}
}
