package app

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/openapi"
	"github.com/retrysafe/retrysafe/framework/openapi/reference"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storemysql"  // MariaDB (the MySQL family)
	_ "github.com/retrysafe/retrysafe/framework/store/storepg"     // PostgreSQL
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // SQLite
	"github.com/retrysafe/retrysafe/framework/telemetry"
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
	// DSN is "sqlite:PATH", a postgres:// URL or a mysql:// URL. Required.
	DSN string
	// Tokens maps bearer tokens to tenants. Defaults to [DefaultTokens].
	Tokens map[string]string
	// Logger receives structured events. Defaults to discarding them.
	Logger *slog.Logger
	// RequestLogLevel is the level of the per-request events
	// ([framework.EngineConfig.RequestLogLevel]). Defaults to Info.
	RequestLogLevel slog.Level
	// Now is the clock of the engine. Defaults to time.Now.
	Now func() time.Time
	// Retention is the replay window and tombstone retention. Defaults to
	// [framework.DefaultRetention].
	Retention framework.Retention
	// LockTimeout bounds waits for locks held by concurrent requests.
	// Defaults to 1s.
	LockTimeout time.Duration
	// PostKeys configures the POST fallback (leases, waits, worker
	// intervals). Defaults to [postkeys.Config]'s.
	PostKeys postkeys.Config
	// ProviderTimeout bounds one call of payments to the sandbox provider.
	// Defaults to [payments.DefaultProviderTimeout] (2s).
	ProviderTimeout time.Duration
	// SandboxMaxHang bounds how long the sandbox provider withholds an
	// answer it loses (pm_card_timeout_after_charge): the call then fails
	// with payments.ErrProviderTimeout, as when ProviderTimeout passes.
	// Defaults to the sandbox's ([sandbox.Config].MaxHang, 30s).
	SandboxMaxHang time.Duration
	// ProviderFunc, for tests only, wraps the sandbox payment provider that
	// payments calls (a provider that stalls, fails or counts calls).
	// Defaults to nil: the sandbox itself.
	ProviderFunc func(payments.Provider) payments.Provider
	// Events configures the outbox relay and the ledger consumer (NATS or
	// in process). Defaults to in process.
	Events EventsConfig
	// TracerProvider traces requests (otelgin), their steps, the store's
	// transactions and SQL statements, and event publishing and
	// consumption. Defaults to a no-op provider, with which the requests
	// only continue the caller's trace context
	// ([server.PropagateTraceContext]).
	TracerProvider trace.TracerProvider
	// RequestDeadline bounds every request ([server.Deadline]): a
	// database that does not answer gives 503 unavailable by then. Defaults
	// to [server.DefaultRequestDeadline] (10s).
	RequestDeadline time.Duration
	// Store configures the database pool (timeouts, pool size: MaxOpenConns
	// defaults to [store.Config]'s); its LockTimeout, Logger and
	// TracerProvider are taken from the fields above.
	Store store.Config
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
	Sandbox *sandbox.Provider
	// Events is the outbox relay and the ledger consumer; Start runs them.
	Events   *Events
	Registry *prometheus.Registry
	router   *gin.Engine
	logger   *slog.Logger
}

// New opens the database ([Open]) and builds the app on it ([NewOn]).
func New(ctx context.Context, cfg Config) (*App, error) {
	db, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	a, err := NewOn(ctx, db, cfg)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return a, nil
}

// Open opens the database of cfg.DSN as [New] does: with cfg.Store, its
// LockTimeout, Logger and TracerProvider taken from cfg.
func Open(ctx context.Context, cfg Config) (*store.DB, error) {
	if cfg.DSN == "" {
		return nil, errors.New("app: Config.DSN is required")
	}
	cfg = cfg.withDefaults()
	storeCfg := cfg.Store
	storeCfg.LockTimeout, storeCfg.Logger, storeCfg.TracerProvider = cfg.LockTimeout, cfg.Logger, cfg.TracerProvider
	return store.Open(ctx, cfg.DSN, storeCfg)
}

// NewOn applies the migrations to db, opened by [Open], and builds the
// app on it; the app's Close closes db. The black-box tests give db a test
// driver in between, which moves the database clock of the POST
// fallback's records (storetest.ShiftRecordClock).
func NewOn(ctx context.Context, db *store.DB, cfg Config) (*App, error) {
	return build(ctx, db, cfg.withDefaults())
}

// withDefaults is cfg with the defaults of its unset fields.
func (cfg Config) withDefaults() Config {
	if cfg.Tokens == nil {
		cfg.Tokens = DefaultTokens()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	return cfg
}

func build(ctx context.Context, db *store.DB, cfg Config) (*App, error) {
	if err := schema.Up(ctx, db); err != nil {
		return nil, err
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics, err := telemetry.NewMetrics(registry)
	if err != nil {
		return nil, err
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{
		Retention: cfg.Retention, Now: cfg.Now, Logger: cfg.Logger, RequestLogLevel: cfg.RequestLogLevel, Metrics: metrics,
	})
	if err != nil {
		return nil, err
	}
	auth, err := server.NewStaticTokens(cfg.Tokens)
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
	provider, err := sandbox.New(db, sandbox.Config{Now: engine.Now, MaxHang: cfg.SandboxMaxHang, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	var charges payments.Provider = provider
	if cfg.ProviderFunc != nil {
		charges = cfg.ProviderFunc(provider)
	}
	pay, err := payments.New(engine, keys, charges, payments.Config{ProviderTimeout: cfg.ProviderTimeout})
	if err != nil {
		return nil, err
	}

	events, err := newEvents(engine, registry, cfg.TracerProvider, cfg.Events, cfg.Logger)
	if err != nil {
		return nil, err
	}

	router := gin.New()
	server.UseProblemHandlers(router, cfg.Logger)
	if _, off := cfg.TracerProvider.(noop.TracerProvider); off {
		// Nothing traces the requests, and the demo sets no global meter
		// provider for otelgin's HTTP metrics (its own are the
		// framework's): continue the caller's trace context only.
		router.Use(server.PropagateTraceContext())
	} else {
		router.Use(server.TraceRequests("retrysafe-demo", cfg.TracerProvider))
	}
	router.GET("/metrics", gin.WrapH(promhttp.HandlerFor(registry, promhttp.HandlerOpts{})))
	router.Use(server.Deadline(cfg.RequestDeadline), server.StorableText())
	router.GET("/healthz", func(c *gin.Context) { c.String(http.StatusOK, "ok") })
	router.GET("/readyz", gin.WrapH(server.Readiness(db.SQL(), 0, cfg.Logger)))

	v1 := router.Group("/v1", server.RequireAuth(auth, cfg.Logger))
	ord.Mount(v1)
	legacy := collection.LegacyConfig{DeprecatedSince: LegacyOrdersDeprecatedSince()}
	if err := ord.MountLegacyPOST(v1, legacy); err != nil {
		return nil, err
	}
	trf.Mount(v1)
	pay.Mount(v1)
	provider.Mount(v1)
	events.Ledger.Mount(v1)
	routes := slices.Concat(ord.Describe("/v1", &legacy), trf.Describe("/v1"), pay.Describe(), provider.Describe("/v1"), events.Ledger.Describe("/v1"))
	specCfg := openapi.Config{Title: "retrysafe demo", Version: "1", Codes: engine.Codes()}
	spec, err := openapi.New(specCfg, routes...)
	if err != nil {
		return nil, err
	}
	router.GET("/openapi.json", gin.WrapH(spec))
	ref, err := reference.New(spec, reference.Config{})
	if err != nil {
		return nil, err
	}
	router.GET("/docs/*any", gin.WrapH(ref))
	// The same API in OpenAPI 3.0, for generators that read 3.0 only.
	specCfg.OpenAPI = openapi.Version30
	spec30, err := openapi.New(specCfg, routes...)
	if err != nil {
		return nil, err
	}
	router.GET("/openapi-3.0.json", gin.WrapH(spec30))

	return &App{DB: db, Engine: engine, Orders: ord, PostKeys: keys, Transfers: trf, Payments: pay, Sandbox: provider, Events: events, Registry: registry, router: router, logger: cfg.Logger}, nil
}

// Handler returns the HTTP handler of the API.
func (a *App) Handler() http.Handler { return a.router }

// Close stops background work and closes the database.
func (a *App) Close() error {
	a.PostKeys.Stop()
	a.Events.close()
	return a.DB.Close()
}

// Start starts the background workers (the POST fallback's recovery worker
// and janitor, the outbox relay and the ledger consumer); Close stops them.
func (a *App) Start(ctx context.Context) error {
	if err := a.PostKeys.Start(ctx); err != nil {
		return err
	}
	return a.Events.start(ctx)
}
