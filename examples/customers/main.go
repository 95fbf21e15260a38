package main

import (
	"context"
	"embed"
	"errors"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"
	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storemysql"  // MariaDB (the MySQL family)
	_ "github.com/retrysafe/retrysafe/framework/store/storepg"     // PostgreSQL
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // SQLite
	"github.com/retrysafe/retrysafe/migrations"
)

// schema holds the customers table, one goose source per database,
// named after its store driver (schema/postgres, schema/sqlite, schema/mysql).
//
//go:embed schema/postgres/*.sql schema/sqlite/*.sql schema/mysql/*.sql
var schema embed.FS

func main() {
	dsn := os.Getenv("DATABASE_URL")
	if dsn == "" {
		dsn = "sqlite:customers.db"
	}
	addr := os.Getenv("ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	gin.SetMode(gin.ReleaseMode)
	logger := slog.New(slog.NewTextHandler(os.Stderr, nil))
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, dsn, addr, logger); err != nil {
		logger.Error("customers", "error", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, dsn, addr string, logger *slog.Logger) error {
	gdb, err := openGorm(dsn, logger)
	if err != nil {
		return err
	}
	db, err := store.New(ctx, gdb, store.Config{})
	if err != nil {
		return err
	}
	defer db.Close()
	handler, err := newHandler(ctx, db, map[string]string{"sk_test_acme": "acme"}, logger)
	if err != nil {
		return err
	}
	srv, err := server.New(handler, server.Config{}) // timeouts; framing: no smuggled requests
	if err != nil {
		return err
	}
	srv.Addr = addr
	go func() {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	}()
	logger.Info("listening", "addr", addr)
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// openGorm opens the application's own *gorm.DB, as a service already has
// one: "sqlite:PATH" (pure-Go SQLite in WAL mode, which the framework
// requires) or a postgres:// URL. The framework is handed it
// with store.New and sets what it needs per transaction. Its gorm logger
// is store.NewGormLogger on the service's logger: failed and slow SQL,
// without parameter values, so that no key or field value reaches the
// log.
func openGorm(dsn string, logger *slog.Logger) (*gorm.DB, error) {
	cfg := &gorm.Config{Logger: store.NewGormLogger(logger, store.GormLoggerConfig{})}
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		return gorm.Open(sqlite.Open("file:"+path+"?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)&_pragma=foreign_keys(1)"), cfg)
	}
	return gorm.Open(postgres.Open(dsn), cfg)
}

// newHandler applies the framework's tables and the customers table, and
// mounts the customers resource behind bearer-token auth.
func newHandler(ctx context.Context, db *store.DB, tokens map[string]string, logger *slog.Logger) (http.Handler, error) {
	if err := migrations.Up(ctx, db); err != nil {
		return nil, err
	}
	tables, err := fs.Sub(schema, "schema")
	if err != nil {
		return nil, err
	}
	if err := migrations.Apply(ctx, db, tables, "customers_schema_version"); err != nil {
		return nil, err
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{Logger: logger})
	if err != nil {
		return nil, err
	}
	col, err := customers(engine)
	if err != nil {
		return nil, err
	}
	auth, err := server.NewStaticTokens(tokens)
	if err != nil {
		return nil, err
	}
	router := gin.New()
	server.UseProblemHandlers(router, logger) // problem+json 404, 405 and panics
	router.Use(server.Deadline(0), server.StorableText())
	col.Mount(router.Group("/v1", server.RequireAuth(auth, logger)))
	return router, nil
}
