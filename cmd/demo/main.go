// Command demo runs the retrysafe demo API: orders on the PUT pattern (and
// its legacy POST route), payments and transfers on the POST fallback.
//
//	go run ./cmd/demo                       # SQLite file retrysafe-demo.db, 127.0.0.1:8080
//	go run ./cmd/demo -addr 127.0.0.1:9090 -db postgres://postgres@127.0.0.1:5432/test
//
// DATABASE_URL is used when -db is absent; DEMO_API_TOKENS="tok:tenant,…"
// replaces the default tokens sk_test_acme (acme) and sk_test_globex (globex).
//
// Events: -nats nats://127.0.0.1:4222 (or NATS_URL) publishes the outbox to
// NATS JetStream and runs the ledger's durable consumer; without it the
// relay hands events to the ledger in process. OTEL_EXPORTER_OTLP_ENDPOINT
// exports traces with OTLP over HTTP; unset, nothing is traced.
//
// DEMO_POSTKEYS_LEASE and DEMO_POSTKEYS_RECOVERY_INTERVAL (Go durations)
// tune the POST fallback; DEMO_TEST_HOLD is for fault tests.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", "127.0.0.1:8080", "listen address HOST:PORT")
	dsn := fs.String("db", "", `database: "sqlite:PATH" or a postgres:// URL (default $DATABASE_URL, else sqlite:retrysafe-demo.db)`)
	natsURL := fs.String("nats", "", "NATS JetStream URL for the outbox relay and the ledger consumer (default $NATS_URL, else in process)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		*dsn = getenv("DATABASE_URL")
	}
	if *dsn == "" {
		*dsn = "sqlite:retrysafe-demo.db"
	}
	tokens := app.DefaultTokens()
	if list := getenv("DEMO_API_TOKENS"); list != "" {
		var err error
		if tokens, err = framework.ParseTokenList(list); err != nil {
			return err
		}
	}
	if *natsURL == "" {
		*natsURL = getenv("NATS_URL")
	}
	logger := slog.New(framework.TraceLogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	gin.SetMode(gin.ReleaseMode)
	tp, shutdownTracing, err := tracerProvider(ctx, getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.WithoutCancel(ctx)) }()

	postKeys, err := postKeysConfig(getenv, stdout)
	if err != nil {
		return err
	}
	a, err := app.New(ctx, app.Config{DSN: *dsn, Tokens: tokens, Logger: logger, TracerProvider: tp,
		Events: app.EventsConfig{NATSURL: *natsURL}, PostKeys: postKeys})
	if err != nil {
		return err
	}
	defer a.Close()
	if err := a.Start(ctx); err != nil {
		return err
	}

	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: a.Handler(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Fprintf(stdout, "retrysafe demo listening on http://%s\n", ln.Addr())
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
