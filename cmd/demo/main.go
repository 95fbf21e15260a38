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

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/internal/failpoint"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
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
	pool := fs.Int("pool", 0, "database pool size (default 20 on PostgreSQL, 4 on SQLite)")
	dsn := fs.String("db", "", `database: "sqlite:PATH", a postgres:// URL or a mysql:// URL (default $DATABASE_URL, else sqlite:retrysafe-demo.db)`)
	natsURL := fs.String("nats", "", "NATS JetStream URL for the outbox relay and the ledger consumer (default $NATS_URL, else in process)")
	deadline := fs.Duration("request-deadline", server.DefaultRequestDeadline, "deadline of every request; past it, 503 unavailable")
	readHeader := fs.Duration("read-header-timeout", server.DefaultReadHeaderTimeout, "time to read a request's headers")
	read := fs.Duration("read-timeout", server.DefaultReadTimeout, "time to read a whole request, headers and body")
	write := fs.Duration("write-timeout", server.DefaultWriteTimeout, "time from the end of the headers to the end of the response")
	idle := fs.Duration("idle-timeout", server.DefaultIdleTimeout, "keep-alive connections idle this long are closed")
	connect := fs.Duration("db-connect-timeout", 5*time.Second, "time to open one database connection")
	statement := fs.Duration("db-statement-timeout", 5*time.Second, "time one SQL statement of a write transaction may run (PostgreSQL)")
	replica := fs.String("replica", "", "a read replica of -db (a hot standby's DSN): completed POST replays, GET, HEAD and list may read it (docs/scaling.md)")
	outboxRetention := fs.Duration("outbox-retention", 0, "keep published outbox events this long (default 0: delete each as it is published)")
	requestLogLevel := slog.LevelInfo
	fs.TextVar(&requestLogLevel, "request-log-level", slog.LevelInfo,
		"level of the events each request logs (debug keeps them out of the log, which is at info); failures are always logged")
	faults := addFaultFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	postKeys, pause, err := faults.postKeys(stdout)
	if err != nil {
		return err
	}
	if pause != nil {
		// The workers' attempts pause too.
		ctx = failpoint.With(ctx, pause)
	}
	if *dsn == "" {
		*dsn = getenv("DATABASE_URL")
	}
	if *dsn == "" {
		*dsn = "sqlite:retrysafe-demo.db"
	}
	tokens := app.DefaultTokens()
	if list := getenv("DEMO_API_TOKENS"); list != "" {
		if tokens, err = server.ParseTokenList(list); err != nil {
			return err
		}
	}
	if *natsURL == "" {
		*natsURL = getenv("NATS_URL")
	}
	logger := slog.New(telemetry.TraceLogHandler(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo})))
	gin.SetMode(gin.ReleaseMode)
	tp, shutdownTracing, err := tracerProvider(ctx, getenv("OTEL_EXPORTER_OTLP_ENDPOINT"))
	if err != nil {
		return err
	}
	defer func() { _ = shutdownTracing(context.WithoutCancel(ctx)) }()

	// Listen at once, so that a supervisor sees the process alive
	// (/healthz) while the database is still starting; everything else
	// answers 503 until the database is connected and migrated.
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	gate := &startingHandler{}
	srv, err := server.New(gate, server.Config{
		ReadHeaderTimeout: *readHeader, ReadTimeout: *read, WriteTimeout: *write, IdleTimeout: *idle,
	})
	if err != nil {
		_ = ln.Close()
		return err
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	shutdown := func() error {
		shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}

	waiting := func() { fmt.Fprintf(stdout, "%s (http://%s answers 503 until then)\n", waitingLine, ln.Addr()) }
	a, err := connectApp(ctx, app.Config{DSN: *dsn, Tokens: tokens, Logger: logger, RequestLogLevel: requestLogLevel, TracerProvider: tp,
		Events: app.EventsConfig{NATSURL: *natsURL, Relay: outbox.Config{Retention: *outboxRetention}}, PostKeys: postKeys, RequestDeadline: *deadline,
		Store: store.Config{ConnectTimeout: *connect, StatementTimeout: *statement, MaxOpenConns: *pool, ReplicaDSN: *replica}}, logger, waiting)
	if err != nil {
		_ = shutdown()
		if ctx.Err() != nil {
			return nil // stopped before the database answered
		}
		return err
	}
	defer a.Close()
	if err := a.Start(ctx); err != nil {
		_ = shutdown()
		return err
	}
	handler := a.Handler()
	if pause != nil {
		handler = failpoint.Handler(handler, pause)
	}
	gate.ready(handler)
	// The ready line says the service is ready to serve, not merely bound:
	// tests and scripts wait for it before sending requests.
	if err := awaitReady(ctx, ln.Addr(), logger); err != nil {
		_ = shutdown()
		if ctx.Err() != nil {
			return nil
		}
		return err
	}
	fmt.Fprintf(stdout, "%s http://%s\n", readyLine, ln.Addr())
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	return shutdown()
}
