package outbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/retrysafe/retrysafe/framework/store"
)

// Defaults of [Config].
const (
	DefaultBatchSize       = 100
	DefaultPollInterval    = 200 * time.Millisecond
	DefaultMaxAttempts     = 10
	DefaultBaseBackoff     = time.Second
	DefaultMaxBackoff      = time.Minute
	DefaultCleanupInterval = time.Minute
	DefaultCleanupBatch    = 1000
	DefaultVacuumInterval  = 5 * time.Second
)

// Config tunes [NewRelay]. The zero value is ready to use.
type Config struct {
	// BatchSize bounds the events one claim takes. Defaults to 100.
	BatchSize int
	// PollInterval is the pause after a run that found nothing to publish.
	// Defaults to 200ms.
	PollInterval time.Duration
	// MaxAttempts is how many refusals ([ErrRefused]) an event gets before
	// it is parked. Defaults to 10.
	MaxAttempts int
	// BaseBackoff is the wait after an event's first refusal, and after the
	// broker is first found unavailable; it doubles with each further one
	// (with jitter) up to MaxBackoff. Defaults to 1s.
	BaseBackoff time.Duration
	// MaxBackoff caps the backoff. Defaults to 1m.
	MaxBackoff time.Duration
	// Retention is how long published events are kept. Zero, the default,
	// keeps none: an event is deleted in the transaction that settles its
	// batch. A positive Retention moves it, in that transaction, to the
	// outbox_published table, whence the cleanup deletes it that much
	// later: for operators who read what was published. Either way the
	// outbox_events table holds only pending and parked events, so a
	// publish adds no index entries to it.
	Retention time.Duration
	// CleanupInterval is the pause between two cleanups run by
	// [Relay.Start]. Defaults to 1m.
	CleanupInterval time.Duration
	// CleanupBatchSize bounds the rows one cleanup DELETE removes. Defaults
	// to 1000.
	CleanupBatchSize int
	// VacuumInterval is, on PostgreSQL, how often [Relay.Start] vacuums
	// outbox_events (VACUUM (SKIP_LOCKED)), busy or idle. Every event the
	// relay deletes leaves a dead row until a vacuum, and every claim reads
	// past them: at thousands of events a second, autovacuum's visits (a
	// minute apart at best) let a claim grow from a millisecond to tens.
	// Vacuuming a table of pending rows is cheap. A relay whose database
	// user may not vacuum the table (only the table's or the database's
	// owner may) logs that once and leaves it to autovacuum. Defaults to
	// 5s; negative turns it off.
	// SQLite reuses a deleted row's space at once and is not vacuumed.
	VacuumInterval time.Duration
	// Registerer receives the relay's metrics (see [Metrics]). Defaults
	// to none: the relay counts into collectors nobody scrapes.
	Registerer prometheus.Registerer
	// Now is the relay's clock (due times, published and parked times,
	// retention). Defaults to time.Now.
	Now func() time.Time
	// Logger receives the relay's events. Defaults to discarding them.
	// A zap user passes slog.New(zapslog.NewHandler(core)), from
	// go.uber.org/zap/exp/zapslog.
	Logger *slog.Logger
	// TracerProvider makes a producer span per publish, a child of the
	// span of the request that wrote the event; the event travels with the
	// producer span's context, so a consumer's span links into the
	// request's trace. Defaults to none: events travel with the request's
	// context as written.
	TracerProvider trace.TracerProvider
}

func (c Config) withDefaults() (Config, error) {
	if c.BatchSize < 0 || c.PollInterval < 0 || c.MaxAttempts < 0 || c.BaseBackoff < 0 || c.MaxBackoff < 0 ||
		c.Retention < 0 || c.CleanupInterval < 0 || c.CleanupBatchSize < 0 { // VacuumInterval < 0: off
		return c, errors.New("outbox: Config durations and sizes must not be negative")
	}
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defD := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.BatchSize, DefaultBatchSize)
	def(&c.MaxAttempts, DefaultMaxAttempts)
	def(&c.CleanupBatchSize, DefaultCleanupBatch)
	defD(&c.PollInterval, DefaultPollInterval)
	defD(&c.BaseBackoff, DefaultBaseBackoff)
	defD(&c.MaxBackoff, DefaultMaxBackoff)
	defD(&c.CleanupInterval, DefaultCleanupInterval)
	defD(&c.VacuumInterval, DefaultVacuumInterval)
	if c.MaxBackoff < c.BaseBackoff {
		return c, errors.New("outbox: MaxBackoff must not be below BaseBackoff")
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.TracerProvider == nil {
		c.TracerProvider = noop.NewTracerProvider()
	}
	return c, nil
}

// Relay publishes the outbox's pending events through a [Publisher], at
// least once and in order per aggregate.
//
// Several relays may run against one PostgreSQL or MariaDB database (one
// per API process): each claims a batch with FOR UPDATE SKIP LOCKED and
// holds it until the batch is settled, and a claim always starts at an
// aggregate's earliest pending event, so no two relays publish one
// aggregate at once ([store.Outbox.ClaimLocks]). On SQLite, run one relay
// per database.
//
// An event the publisher refuses is retried with exponential backoff, and
// the aggregate's later events wait behind it. After [Config.MaxAttempts]
// refusals it is parked: counted, kept, never published, and the
// aggregate's later events are published without it (a consumer that needs
// every event of an aggregate sees a gap in Seq). [Relay.Requeue] makes a
// parked event pending again once its cause is fixed. When the broker is unavailable, events
// keep accumulating and nothing is counted against them; the relay retries
// with backoff and catches up when the broker returns.
type Relay struct {
	db      *store.DB
	ob      store.Outbox
	pub     Publisher
	cfg     Config
	metrics *Metrics
	tracer  trace.Tracer

	mu     sync.Mutex
	cancel context.CancelFunc
	done   chan struct{}
}

// NewRelay builds a relay over db's outbox that publishes through pub.
func NewRelay(db *store.DB, pub Publisher, cfg Config) (*Relay, error) {
	if db == nil || pub == nil {
		return nil, errors.New("outbox: NewRelay needs a database and a publisher")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	r := &Relay{db: db, ob: db.Driver.Outbox(), pub: pub, cfg: cfg,
		tracer: cfg.TracerProvider.Tracer("github.com/retrysafe/retrysafe/framework/outbox")}
	if r.metrics, err = newMetrics(cfg.Registerer, db); err != nil {
		return nil, err
	}
	r.metrics.now = cfg.Now
	return r, nil
}

// RunStats counts what one [Relay.RunOnce] did.
type RunStats struct {
	// Claimed events were handed to the publisher's loop.
	Claimed int
	// Published events were accepted by the publisher.
	Published int
	// Refused events were refused and scheduled for a retry.
	Refused int
	// Parked events were refused for the last time.
	Parked int
	// Deferred events were claimed but not published in this run, because
	// an earlier event of their aggregate failed or the broker was
	// unavailable; they stay pending.
	Deferred int
}

// RunOnce claims one batch, publishes it and records the outcome.
func (r *Relay) RunOnce(ctx context.Context) (RunStats, error) {
	var (
		stats       RunStats
		unavailable error
	)
	now := r.cfg.Now()
	n, err := r.withBatch(ctx, now, r.cfg.BatchSize, func(batch []claimedEvent) store.OutboxSettleParams {
		var done store.OutboxSettleParams
		blocked := map[[3]string]bool{}
		for _, ce := range batch {
			agg := [3]string{ce.event.Tenant, ce.event.AggregateType, ce.event.AggregateID}
			if blocked[agg] || unavailable != nil || ctx.Err() != nil {
				stats.Deferred++
				continue
			}
			err := r.publish(ctx, ce.event)
			switch {
			case err == nil:
				done.Published = append(done.Published, ce.position)
				stats.Published++
			case errors.Is(err, ErrRefused):
				blocked[agg] = true
				attempts := ce.attempts + 1
				st := store.OutboxRefusal{Position: ce.position, Error: truncate(err.Error(), 1000),
					RetryAt: now.Add(r.backoff(attempts)), Park: attempts >= r.cfg.MaxAttempts}
				done.Refused = append(done.Refused, st)
				if st.Park {
					stats.Parked++
					r.cfg.Logger.LogAttrs(ctx, slog.LevelError, "outbox event parked",
						slog.String("event", ce.event.ID.String()), slog.String("type", ce.event.Type),
						slog.Int("attempts", attempts), slog.String("error", st.Error))
				} else {
					stats.Refused++
				}
			default:
				unavailable = err
				stats.Deferred++
			}
		}
		return done
	})
	stats.Claimed = n
	if err != nil {
		// Nothing of this batch was recorded: every event is pending again
		// and published once more by the next run.
		return RunStats{Claimed: n, Deferred: n}, fmt.Errorf("outbox: relay run: %w", err)
	}
	r.metrics.published.Add(float64(stats.Published))
	r.metrics.retried.Add(float64(stats.Refused + stats.Parked))
	r.metrics.parked.Add(float64(stats.Parked))
	if unavailable != nil {
		r.metrics.retried.Add(1)
		return stats, fmt.Errorf("%w: %w", ErrUnavailable, unavailable)
	}
	return stats, nil
}

// publish publishes ev in a producer span that continues the writing
// request's trace.
func (r *Relay) publish(ctx context.Context, ev Event) error {
	prop := propagation.TraceContext{}
	parent := prop.Extract(ctx, propagation.MapCarrier(ev.Headers))
	pctx, span := r.tracer.Start(parent, "publish "+ev.Type, trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(attribute.String("messaging.message.id", ev.ID.String()),
			attribute.String("retrysafe.event.type", ev.Type), attribute.Int64("retrysafe.event.seq", ev.Seq)))
	if span.SpanContext().IsValid() {
		headers := make(map[string]string, len(ev.Headers)+2)
		for k, v := range ev.Headers {
			headers[k] = v
		}
		prop.Inject(pctx, propagation.MapCarrier(headers))
		ev.Headers = headers
	}
	err := r.pub.Publish(ctx, ev)
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, "publish failed")
	}
	span.End()
	return err
}

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// backoff is the wait before the attempt after attempt n (1-based): the base
// doubled n-1 times, capped, with up to 20% jitter off.
func (r *Relay) backoff(n int) time.Duration {
	d := r.cfg.BaseBackoff
	for i := 1; i < n && d < r.cfg.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, r.cfg.MaxBackoff)
	return d - time.Duration(rand.Int64N(int64(d)/5+1))
}

// Drain runs [Relay.RunOnce] until a run claims nothing, and returns the
// totals. It stops at the first error.
func (r *Relay) Drain(ctx context.Context) (RunStats, error) {
	var total RunStats
	for {
		s, err := r.RunOnce(ctx)
		total.Claimed += s.Claimed
		total.Published += s.Published
		total.Refused += s.Refused
		total.Parked += s.Parked
		total.Deferred += s.Deferred
		if err != nil || s.Claimed == 0 {
			return total, err
		}
	}
}

// Requeue makes the parked event id pending again, with a fresh count of
// attempts. It is published like a new event, after any later event of its
// aggregate that was published while it was parked. It returns
// [ErrNotParked] when id names no parked event.
func (r *Relay) Requeue(ctx context.Context, id uuid.UUID) error {
	ok, err := r.ob.Requeue(ctx, r.db.Gorm, store.OutboxRequeueParams{ID: id.String(), Now: r.cfg.Now()})
	if err != nil {
		return r.db.Classify(err)
	}
	if !ok {
		return ErrNotParked
	}
	return nil
}

// CleanupStats counts what one cleanup did.
type CleanupStats struct {
	Deleted int64
	// Batches is the number of DELETE statements run.
	Batches int
}

// CleanupOnce deletes events published more than [Config.Retention] ago, in
// batches of [Config.CleanupBatchSize], one statement each. Pending and
// parked events are never deleted. With no retention it deletes the events
// a relay that kept them left in outbox_published.
func (r *Relay) CleanupOnce(ctx context.Context) (CleanupStats, error) {
	var stats CleanupStats
	cutoff := r.cfg.Now().Add(-r.cfg.Retention)
	for ctx.Err() == nil {
		n, err := r.ob.DeletePublished(ctx, r.db.Gorm, store.OutboxDeletePublishedParams{Before: cutoff, Limit: r.cfg.CleanupBatchSize})
		if err != nil {
			return stats, r.db.Classify(err)
		}
		stats.Batches++
		stats.Deleted += n
		if n < int64(r.cfg.CleanupBatchSize) {
			break
		}
	}
	return stats, ctx.Err()
}

// Start runs the relay in a goroutine until ctx ends or [Relay.Stop] is
// called: batches back to back while there is work, a pause of
// Config.PollInterval when there is none, a growing backoff while the broker
// is unavailable, and a cleanup every Config.CleanupInterval. It returns
// [ErrRunning] if the relay already runs.
func (r *Relay) Start(ctx context.Context) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		return ErrRunning
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	r.cancel, r.done = cancel, done
	go func() {
		defer close(done)
		r.work(ctx)
	}()
	return nil
}

// vacuumer returns what work calls before every run: it vacuums
// outbox_events once VacuumInterval has passed since the last vacuum, until
// the database refuses (the user does not own the table).
func (r *Relay) vacuumer() func(context.Context) {
	if r.cfg.VacuumInterval < 0 {
		return func(context.Context) {}
	}
	last, refused := time.Now(), false
	return func(ctx context.Context) {
		if refused || time.Since(last) < r.cfg.VacuumInterval {
			return
		}
		last = time.Now()
		err := r.ob.Vacuum(ctx, r.db.Gorm)
		switch {
		case err == nil || ctx.Err() != nil:
		case errors.Is(err, store.ErrVacuumRefused):
			refused = true
			r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox relay may not vacuum outbox_events; autovacuum alone will",
				slog.String("error", err.Error()))
		default:
			r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox vacuum failed", slog.String("error", err.Error()))
		}
	}
}

// Stop stops the relay and waits for it. A batch in flight is abandoned
// unsettled, so its events are published again later. It is safe to call
// when the relay does not run, and more than once.
func (r *Relay) Stop() {
	r.mu.Lock()
	cancel, done := r.cancel, r.done
	r.cancel, r.done = nil, nil
	r.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
}

func (r *Relay) work(ctx context.Context) {
	cleanup := time.NewTicker(r.cfg.CleanupInterval)
	defer cleanup.Stop()
	failures := 0
	vacuum := r.vacuumer()
	for ctx.Err() == nil {
		vacuum(ctx)
		stats, err := r.RunOnce(ctx)
		wait := time.Duration(0)
		switch {
		case err != nil:
			failures++
			wait = r.backoff(failures)
			if ctx.Err() == nil {
				r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox relay backing off",
					slog.String("error", err.Error()), slog.Duration("wait", wait))
			}
		case stats.Claimed == 0 || stats.Published == 0:
			failures = 0
			wait = r.cfg.PollInterval
		default:
			failures = 0
		}
		if wait == 0 {
			continue
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-cleanup.C:
			timer.Stop()
			if _, err := r.CleanupOnce(ctx); err != nil && ctx.Err() == nil {
				r.cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "outbox cleanup failed", slog.String("error", err.Error()))
			}
		case <-timer.C:
		}
	}
}
