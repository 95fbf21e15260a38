package main

import (
	"context"
	"embed"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"
	"github.com/glebarez/sqlite"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storemysql"    // MariaDB (the MySQL family)
	_ "github.com/retrysafe/retrysafe/framework/store/storepg"     // PostgreSQL
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // SQLite
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/migrations"
)

//go:embed schema/postgres/*.sql schema/sqlite/*.sql schema/mysql/*.sql
var schemaFiles embed.FS

func main() {
	gin.SetMode(gin.ReleaseMode)
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Getenv, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "credits:", err)
		os.Exit(1)
	}
}

// run parses flags, builds the service and serves until ctx ends.
func run(ctx context.Context, args []string, getenv func(string) string, out io.Writer) error {
	flags := flag.NewFlagSet("credits", flag.ContinueOnError)
	addr := flags.String("addr", "127.0.0.1:8081", "listen address")
	dsn := flags.String("db", "", `"sqlite:PATH", a postgres:// or a mysql:// URL (default: $DATABASE_URL, else sqlite:credits.db)`)
	if err := flags.Parse(args); err != nil {
		return err
	}
	if *dsn == "" {
		*dsn = getenv("DATABASE_URL")
	}
	if *dsn == "" {
		*dsn = "sqlite:credits.db"
	}
	svc, err := newService(ctx, *dsn, map[string]string{"sk_test_acme": "acme", "sk_test_globex": "globex"},
		slog.New(slog.NewTextHandler(out, nil)), store.Config{})
	if err != nil {
		return err
	}
	defer svc.Close()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		return err
	}
	srv, err := server.New(svc.Handler, server.Config{}) // timeouts; framing: no smuggled requests
	if err != nil {
		return err
	}
	if err := svc.keys.Start(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "credits listening on http://%s\n", ln.Addr())
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	if err := srv.Serve(ln); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openGorm opens the application's own *gorm.DB, as a service already has
// one: "sqlite:PATH" (pure-Go SQLite in WAL mode, which the framework
// requires), a postgres:// URL or a mysql:// URL. The framework is handed it
// with store.New and sets what it needs per transaction. Its gorm logger
// is store.NewGormLogger on the service's logger: failed and slow SQL,
// without parameter values, so that no key or field value reaches the
// log.
func openGorm(dsn string, logger *slog.Logger) (*gorm.DB, error) {
	cfg := &gorm.Config{Logger: store.NewGormLogger(logger, store.GormLoggerConfig{})}
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		return gorm.Open(sqlite.Open("file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"), cfg)
	}
	if strings.HasPrefix(dsn, storemysql.Scheme) {
		// go-sql-driver's DSN (parseTime=true, utf8mb4) from the URL.
		mc, err := storemysql.Config(dsn, 5*time.Second)
		if err != nil {
			return nil, err
		}
		return gorm.Open(mysql.Open(mc.FormatDSN()), cfg)
	}
	return gorm.Open(postgres.Open(dsn), cfg)
}

// service is the wired application: database, engine, POST fallback and
// router.
type service struct {
	Handler http.Handler
	db      *store.DB
	keys    *postkeys.Adapter
}

// newService opens dsn, applies the migrations and builds the router; cfg
// is the store's configuration (timeouts).
func newService(ctx context.Context, dsn string, tokens map[string]string, logger *slog.Logger, cfg store.Config) (*service, error) {
	gdb, err := openGorm(dsn, logger)
	if err != nil {
		return nil, err
	}
	db, err := store.New(ctx, gdb, cfg)
	if err != nil {
		if sqlDB, derr := gdb.DB(); derr == nil {
			_ = sqlDB.Close()
		}
		return nil, err
	}
	svc, err := build(ctx, db, tokens, logger)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return svc, nil
}

func build(ctx context.Context, db *store.DB, tokens map[string]string, logger *slog.Logger) (*service, error) {
	// The framework's tables (idempotency records), then this service's.
	if err := migrations.Up(ctx, db); err != nil {
		return nil, err
	}
	schema, err := fs.Sub(schemaFiles, "schema")
	if err != nil {
		return nil, err
	}
	if err := migrations.Apply(ctx, db, schema, "credits_schema_version"); err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	metrics, err := telemetry.NewMetrics(registry)
	if err != nil {
		return nil, err
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{Logger: logger, Metrics: metrics})
	if err != nil {
		return nil, err
	}
	keys, err := postkeys.New(engine, postkeys.Config{})
	if err != nil {
		return nil, err
	}
	credits, err := NewCredits(engine, keys)
	if err != nil {
		return nil, err
	}
	auth, err := server.NewStaticTokens(tokens)
	if err != nil {
		return nil, err
	}
	router := gin.New()
	server.UseProblemHandlers(router, logger) // problem+json 404, 405 and panics
	// A deadline on every request (503 when the database does not answer
	// in time) and 400 for text no database can store, in paths and queries.
	router.Use(server.Deadline(0), server.StorableText())
	router.GET("/metrics", gin.WrapH(promhttp.HandlerFor(registry, promhttp.HandlerOpts{})))
	credits.Mount(router.Group("/v1", server.RequireAuth(auth, logger)))
	return &service{Handler: router, db: db, keys: keys}, nil
}

// Close stops the POST fallback's workers and closes the database.
func (s *service) Close() error {
	s.keys.Stop()
	return s.db.Close()
}
