package framework

import (
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
)

// Engine is the shared runtime of both patterns: the database, the binder,
// the retention policy, the clock, the logger and the metrics. Collections
// (PUT resources) and the POST fallback are built on one Engine.
type Engine struct {
	db        *store.DB
	binder    *Binder
	retention Retention
	now       func() time.Time
	logger    *slog.Logger
	metrics   *telemetry.Metrics
	codes     *Codes
}

// EngineConfig configures [NewEngine]. The zero value is ready to use.
type EngineConfig struct {
	// Retention is the replay window and tombstone retention. Defaults to
	// [DefaultRetention].
	Retention Retention
	// Binder bounds request bodies. Defaults to a 1 MiB body limit and a
	// JSON depth of [DefaultMaxDepth].
	Binder BinderConfig
	// Now is the process clock of the POST fallback's business rows and
	// attempts, the outbox and the inbox; tests move it instead of
	// sleeping. The PUT engine does not read it: its replay window,
	// tombstones and row times are on the database clock. Defaults to
	// time.Now.
	Now func() time.Time
	// Logger receives one structured event per state transition. Defaults to
	// a logger that discards everything.
	// A zap user passes slog.New(zapslog.NewHandler(core)), from
	// go.uber.org/zap/exp/zapslog.
	Logger *slog.Logger
	// RequestLogLevel is the level of the events the engine, its
	// collections and the POST fallback log at Info: one or two per request
	// (a resource write, an idempotency record's transitions, a legacy
	// route used) and the janitor's summaries. slog.LevelDebug keeps them
	// out of an Info log under load; failures are logged at Warn and Error
	// whatever this says. It may not be above Info. Defaults to
	// slog.LevelInfo (the zero value): every request is logged.
	RequestLogLevel slog.Level
	// Metrics receives request counts ([telemetry.NewMetrics]). Defaults
	// to collectors on a private registry.
	Metrics *telemetry.Metrics
}

// NewEngine builds an Engine on db.
func NewEngine(db *store.DB, cfg EngineConfig) (*Engine, error) {
	if db == nil {
		return nil, errors.New("framework: NewEngine needs a database")
	}
	retention, err := cfg.Retention.WithDefaults()
	if err != nil {
		return nil, err
	}
	binder, err := NewBinder(cfg.Binder)
	if err != nil {
		return nil, err
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.RequestLogLevel > slog.LevelInfo {
		return nil, fmt.Errorf("framework: EngineConfig.RequestLogLevel %s is above INFO", cfg.RequestLogLevel)
	}
	if cfg.RequestLogLevel != slog.LevelInfo {
		cfg.Logger = slog.New(telemetry.RequestLogHandler(cfg.Logger.Handler(), cfg.RequestLogLevel))
	}
	if cfg.Metrics == nil {
		if cfg.Metrics, err = telemetry.NewMetrics(nil); err != nil {
			return nil, err
		}
	}
	return &Engine{db: db, binder: binder, retention: retention, now: cfg.Now, logger: cfg.Logger, metrics: cfg.Metrics, codes: NewCodes()}, nil
}

// DB returns the engine's database.
func (e *Engine) DB() *store.DB { return e.db }

// Binder returns the engine's binder.
func (e *Engine) Binder() *Binder { return e.binder }

// Retention returns the engine's retention policy.
func (e *Engine) Retention() Retention { return e.retention }

// Now returns the current time of the engine's clock in UTC, truncated to
// microseconds: the precision PostgreSQL keeps, so that a timestamp reads
// back exactly as it was written and a replayed body is byte-identical.
func (e *Engine) Now() time.Time { return e.now().UTC().Truncate(time.Microsecond) }

// Logger returns the engine's logger, with [EngineConfig.RequestLogLevel]
// applied to its Info events.
func (e *Engine) Logger() *slog.Logger { return e.logger }

// Metrics returns the engine's metrics.
func (e *Engine) Metrics() *telemetry.Metrics { return e.metrics }
