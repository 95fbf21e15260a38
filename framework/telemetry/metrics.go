package telemetry

import (
	"context"
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Request outcomes counted by [Metrics.Requests].
const (
	OutcomeExecuted   = "executed"
	OutcomeReplayed   = "replayed"
	OutcomeConverged  = "converged"
	OutcomeInProgress = "in_progress"
	OutcomeKeyReuse   = "key_reuse"
	OutcomeMissingKey = "missing_key"
	OutcomeRejected   = "rejected"
	OutcomeError      = "error"
	// OutcomeClientGone is a request its client gave up before the answer
	// ([ClientGone]): not a server error, whatever stopped the work.
	OutcomeClientGone = "client_gone"
)

// Metrics are the Prometheus collectors shared by both patterns.
type Metrics struct {
	// Requests counts writes by pattern ("put", "patch", "post", "legacy_post"),
	// operation and outcome.
	Requests *prometheus.CounterVec
	// LegacyRequests counts calls of legacy POST routes by tenant and
	// resource, so a team can see which clients still need to move to PUT.
	LegacyRequests *prometheus.CounterVec
	// Registerer is where the collectors were registered; the POST fallback
	// registers its gauges there too.
	Registerer prometheus.Registerer
}

// NewMetrics creates the collectors and registers them on reg, the
// application's registry (prometheus.DefaultRegisterer, or one it serves
// with promhttp.HandlerFor); pass the result as framework.EngineConfig's
// Metrics. The
// POST fallback registers its gauges on the same reg. A nil reg gets a
// private registry, so that several engines in one process (tests) do not
// collide. Collectors already registered on reg are reused.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "retrysafe", Name: "requests_total",
			Help: "Idempotent write requests by pattern, operation and outcome.",
		}, []string{"pattern", "operation", "outcome"}),
		LegacyRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "retrysafe", Name: "legacy_post_requests_total",
			Help: "Requests to legacy POST routes by tenant and resource.",
		}, []string{"tenant", "resource"}),
		Registerer: reg,
	}
	var err error
	if m.Requests, err = registerCounterVec(reg, m.Requests); err != nil {
		return nil, err
	}
	if m.LegacyRequests, err = registerCounterVec(reg, m.LegacyRequests); err != nil {
		return nil, err
	}
	return m, nil
}

// registerCounterVec registers c on reg, or returns the collector already
// registered there under the same name, so that two engines on one registry
// count into the same series instead of an unregistered copy.
func registerCounterVec(reg prometheus.Registerer, c *prometheus.CounterVec) (*prometheus.CounterVec, error) {
	if err := reg.Register(c); err != nil {
		var already prometheus.AlreadyRegisteredError
		if errors.As(err, &already) {
			if existing, ok := already.ExistingCollector.(*prometheus.CounterVec); ok {
				return existing, nil
			}
		}
		return nil, err
	}
	return c, nil
}

// ClientGone reports whether the request whose context is ctx was given up
// by its client: the context was canceled (the connection closed, the
// stream reset), not ended by the request's deadline (server.Deadline),
// which stays 503 unavailable. Whatever the work failed with then, nobody
// reads the answer: the failure is counted as [OutcomeClientGone] and
// logged at Info, never as a server error.
func ClientGone(ctx context.Context) bool {
	return errors.Is(ctx.Err(), context.Canceled)
}
