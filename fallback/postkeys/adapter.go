package postkeys

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
)

// Adapter is the POST Idempotency-Key fallback on one [framework.Engine]:
// the registry of operations, the record statements of its database
// ([store.Records]), and the recovery worker and janitor. Build it with
// [New], add operations with [Register], and run the workers with
// [Adapter.Start] / [Adapter.Stop].
type Adapter struct {
	engine  *framework.Engine
	db      *store.DB
	cfg     Config
	logger  *slog.Logger
	records store.Records
	stored  map[string]bool

	oldestInProgress prometheus.Gauge
	unknownRecords   prometheus.Gauge

	mu  sync.RWMutex
	ops map[string]*operation

	workerMu sync.Mutex
	cancel   context.CancelFunc
	done     chan struct{}
}

// New builds an adapter on e and registers its gauges on
// e.Metrics().Registerer.
func New(e *framework.Engine, cfg Config) (*Adapter, error) {
	if e == nil {
		return nil, errors.New("postkeys: New needs an engine")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	a := &Adapter{engine: e, db: e.DB(), cfg: cfg, logger: e.Logger(), records: e.DB().Driver.Records(), ops: map[string]*operation{},
		stored: map[string]bool{}}
	for _, h := range cfg.StoredHeaders {
		a.stored[h] = true
	}
	a.oldestInProgress = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "retrysafe", Subsystem: "postkeys", Name: "oldest_in_progress_age_seconds",
		Help: "Age of the oldest in_progress idempotency record, read at scrape time.",
	})
	a.unknownRecords = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: "retrysafe", Subsystem: "postkeys", Name: "unknown_records",
		Help: "Idempotency records whose outcome is unknown, read at scrape time.",
	})
	if err := registerScrapeGauges(e.Metrics().Registerer, a); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Adapter) add(op *operation) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if _, dup := a.ops[op.name]; dup {
		return fmt.Errorf("postkeys: operation %q is registered twice", op.name)
	}
	a.ops[op.name] = op
	return nil
}

func (a *Adapter) operation(name string) *operation {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.ops[name]
}

// Lookup returns the live record of (tenant, operation, key); found is
// false when there is none or it has expired on the database clock. The
// record's ResponseHeaders is the stored header as a JSON object
// (http.Header).
func (a *Adapter) Lookup(ctx context.Context, tenant, operation, key string) (rec store.RecordRow, found bool, err error) {
	rec, found, err = a.records.Get(ctx, a.db.Gorm, &store.RecordGetParams{ID: store.RecordKey{Tenant: tenant, Operation: operation, Key: key}})
	if err != nil {
		return store.RecordRow{}, false, a.db.Classify(err)
	}
	if found && rec.Expired {
		return store.RecordRow{}, false, nil
	}
	return rec, found, nil
}

// storable turns an operation's response into what the record keeps: the
// allow-listed headers and the body, or only the reference when the body is
// over the cap. A 5xx response is never kept (DESIGN §6): its error is a
// *serverError, which the request is answered with and which otherwise
// counts as the operation's error (the key is released, or the record left
// unknown after a side effect).
func (a *Adapter) storable(op *operation, resp Response, errorCode string) (storedResponse, error) {
	if resp.Status < 100 || resp.Status > 599 {
		return storedResponse{}, fmt.Errorf("postkeys: operation %q answered status %d", op.name, resp.Status)
	}
	header := http.Header{}
	for k, v := range resp.Header {
		if a.stored[http.CanonicalHeaderKey(k)] {
			header[http.CanonicalHeaderKey(k)] = append([]string(nil), v...)
		}
	}
	if header.Get("Content-Type") == "" && len(resp.Body) > 0 {
		header.Set("Content-Type", "application/json; charset=utf-8")
	}
	out := storedResponse{status: resp.Status, header: header, body: resp.Body, ref: resp.ResourceRef, errorCode: errorCode}
	if resp.Status >= http.StatusInternalServerError {
		return storedResponse{}, &serverError{resp: out}
	}
	if len(resp.Body) > a.cfg.MaxStoredBody {
		if op.render == nil || resp.ResourceRef == "" {
			return storedResponse{}, fmt.Errorf("postkeys: operation %q answered %d bytes, over the %d stored, without a RenderFunc and a ResourceRef",
				op.name, len(resp.Body), a.cfg.MaxStoredBody)
		}
		out.truncated = true
	}
	return out, nil
}

// rejection renders a business rejection exactly as the engine's
// RenderProblem does: these bytes are stored and replayed.
func (a *Adapter) rejection(err error) storedResponse {
	status, h, body := a.engine.RenderProblem(err)
	header := http.Header{}
	for k, v := range h {
		if a.stored[k] {
			header[k] = v
		}
	}
	return storedResponse{status: status, header: header, body: body, errorCode: string(framework.ErrorFor(err).Code)}
}

// logTransition writes the one structured event of a state transition.
func (a *Adapter) logTransition(ctx context.Context, at *attempt, event string, state store.RecordState, status int, replayed bool, extra ...slog.Attr) {
	if !a.logger.Enabled(ctx, slog.LevelInfo) {
		return // no key hash and no attributes for a logger that drops them
	}
	attrs := append([]slog.Attr{
		slog.String("tenant", at.id.Tenant),
		slog.String("operation", at.id.Operation),
		slog.String("key_sha256", telemetry.KeyHash(at.id.Key)),
		slog.String("fingerprint", framework.FingerprintPrefix(at.fingerprint)),
		slog.String("event", event),
		slog.String("state", string(state)),
		slog.Int64("attempt", at.number),
		slog.Int64("fence", at.fence),
		slog.String("recovery_point", at.point),
		slog.Bool("replayed", replayed),
		slog.Int("status", status),
		slog.Duration("duration", time.Since(at.start)),
	}, extra...)
	a.logger.LogAttrs(ctx, slog.LevelInfo, "idempotency record "+event, attrs...)
}
