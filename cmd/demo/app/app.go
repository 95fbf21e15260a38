// Package app wires the retrysafe demo: the database, migrations, the
// engine, the example resources, metrics and the HTTP router. cmd/demo runs
// it as a process; the black-box tests in tests/ serve its [App.Handler].
package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/resources/orders"
	"github.com/retrysafe/retrysafe/resources/payments"
	"github.com/retrysafe/retrysafe/resources/payments/sandbox"
	"github.com/retrysafe/retrysafe/resources/schema"
	"github.com/retrysafe/retrysafe/resources/transfers"
)

// DefaultTokens are the demo's bearer tokens when none are configured.
func DefaultTokens() map[string]string {
	return map[string]string{"sk_test_acme": "acme", "sk_test_globex": "globex"}
}

// LegacyOrdersDeprecatedSince is when POST /v1/orders was deprecated in
// favour of PUT /v1/orders/{id}: 2026-01-01.
func LegacyOrdersDeprecatedSince() time.Time {
	return time.Date(2026, time.January, 1, 0, 0, 0, 0, time.UTC)
}

// Config configures [New].
type Config struct {
	// DSN is "sqlite:PATH" or a postgres:// URL. Required.
	DSN string
	// Tokens maps bearer tokens to tenants. Defaults to [DefaultTokens].
	Tokens map[string]string
	// Logger receives structured events. Defaults to discarding them.
	Logger *slog.Logger
	// Now is the clock of the engine. Defaults to time.Now.
	Now func() time.Time
	// Retention is the replay window and tombstone retention. Defaults to
	// [framework.DefaultRetention].
	Retention framework.Retention
	// LockTimeout bounds waits for locks held by concurrent requests.
	// Defaults to 1s.
	LockTimeout time.Duration
	// PostKeys configures the POST fallback (leases, waits, worker
	// intervals, test fail points). Defaults to [postkeys.Config]'s.
	PostKeys postkeys.Config
	// ProviderTimeout bounds one call of payments to the sandbox provider.
	// Defaults to [payments.DefaultProviderTimeout] (2s).
	ProviderTimeout time.Duration
	// MaxOpenConns caps the database pool. Defaults to [store.Config]'s.
	MaxOpenConns int
}

// App is the demo service.
type App struct {
	DB     *store.DB
	Engine *framework.Engine
	Orders *orders.Orders
	// PostKeys is the POST fallback; Start runs its workers.
	PostKeys  *postkeys.Adapter
	Transfers *transfers.Transfers
	Payments  *payments.Payments
	// Sandbox is the payment provider of the demo, on the same database.
	Sandbox  *sandbox.Provider
	Registry *prometheus.Registry
	router   *gin.Engine
	logger   *slog.Logger
}

// New opens the database, applies migrations and builds the router.
func New(ctx context.Context, cfg Config) (*App, error) {
	if cfg.DSN == "" {
		return nil, errors.New("app: Config.DSN is required")
	}
	if cfg.Tokens == nil {
		cfg.Tokens = DefaultTokens()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	db, err := store.Open(ctx, cfg.DSN, store.Config{LockTimeout: cfg.LockTimeout, MaxOpenConns: cfg.MaxOpenConns, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	a, err := build(ctx, db, cfg)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return a, nil
}

func build(ctx context.Context, db *store.DB, cfg Config) (*App, error) {
	if err := schema.Up(ctx, db.SQL(), db.Dialect.Name()); err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(prometheus.NewGoCollector())
	metrics, err := framework.NewMetrics(registry)
	if err != nil {
		return nil, err
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{
		Retention: cfg.Retention, Now: cfg.Now, Logger: cfg.Logger, Metrics: metrics,
	})
	if err != nil {
		return nil, err
	}
	auth, err := framework.NewStaticTokens(cfg.Tokens)
	if err != nil {
		return nil, err
	}
	ord, err := orders.New(engine)
	if err != nil {
		return nil, err
	}
	keys, err := postkeys.New(engine, cfg.PostKeys)
	if err != nil {
		return nil, err
	}
	trf, err := transfers.New(engine, keys)
	if err != nil {
		return nil, err
	}
	provider, err := sandbox.New(db, sandbox.Config{Now: engine.Now, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	pay, err := payments.New(engine, keys, provider, payments.Config{ProviderTimeout: cfg.ProviderTimeout})
	if err != nil {
		return nil, err
	}

	router := gin.New()
	router.HandleMethodNotAllowed = true
	router.Use(gin.CustomRecoveryWithWriter(nil, func(c *gin.Context, recovered any) {
		framework.WriteProblem(c.Writer, c.Request, cfg.Logger, fmt.Errorf("panic: %v", recovered))
		c.Abort()
	}))
	router.NoRoute(func(c *gin.Context) {
		framework.WriteProblem(c.Writer, c.Request, cfg.Logger, framework.Errorf(framework.CodeNotFound, "no route %s %s", c.Request.Method, c.Request.URL.Path))
	})
	router.NoMethod(func(c *gin.Context) {
		framework.WriteProblem(c.Writer, c.Request, cfg.Logger, framework.Errorf(framework.CodeMethodNotAllowed, "%s is not allowed on %s", c.Request.Method, c.Request.URL.Path))
	})
	router.GET("/metrics", gin.WrapH(promhttp.HandlerFor(registry, promhttp.HandlerOpts{})))
	router.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })

	v1 := router.Group("/v1", framework.RequireAuth(auth, cfg.Logger))
	ord.Mount(v1)
	if err := ord.MountLegacyPOST(v1, framework.LegacyConfig{DeprecatedSince: LegacyOrdersDeprecatedSince()}); err != nil {
		return nil, err
	}
	trf.Mount(v1)
	pay.Mount(v1)
	provider.Mount(v1)

	return &App{DB: db, Engine: engine, Orders: ord, PostKeys: keys, Transfers: trf, Payments: pay, Sandbox: provider, Registry: registry, router: router, logger: cfg.Logger}, nil
}

// Handler returns the HTTP handler of the API.
func (a *App) Handler() http.Handler { return a.router }

// Close stops background work and closes the database.
func (a *App) Close() error {
	a.PostKeys.Stop()
	return a.DB.Close()
}

// Start starts the background workers (the POST fallback's recovery worker
// and janitor); Close stops them.
func (a *App) Start(ctx context.Context) error { return a.PostKeys.Start(ctx) }
