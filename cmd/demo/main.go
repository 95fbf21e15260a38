// Command demo runs the retrysafe demo API: orders on the PUT pattern (and
// its legacy POST route), payments and transfers on the POST fallback.
//
//	go run ./cmd/demo                       # SQLite file retrysafe-demo.db, 127.0.0.1:8080
//	go run ./cmd/demo -addr 127.0.0.1:9090 -db postgres://postgres@127.0.0.1:5432/test
//
// DATABASE_URL is used when -db is absent; DEMO_API_TOKENS="tok:tenant,…"
// replaces the default tokens sk_test_acme (acme) and sk_test_globex (globex).
// -lease, -recovery-interval and -pause-at are for fault tests (faults.go).
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
	faults := addFaultFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	postKeys, err := faults.postKeys()
	if err != nil {
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
		if tokens, err = framework.ParseTokenList(list); err != nil {
			return err
		}
	}
	logger := slog.New(slog.NewJSONHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	gin.SetMode(gin.ReleaseMode)

	a, err := app.New(ctx, app.Config{DSN: *dsn, Tokens: tokens, Logger: logger, PostKeys: postKeys})
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
