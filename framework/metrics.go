package framework

import (
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
)

// Metrics are the Prometheus collectors shared by both patterns.
type Metrics struct {
	// Requests counts writes by pattern ("put", "post", "legacy_post"),
	// operation and outcome.
	Requests *prometheus.CounterVec
	// LegacyRequests counts calls of legacy POST routes by tenant and
	// resource, so a team can see which clients still need to move to PUT.
	LegacyRequests *prometheus.CounterVec
	// Registerer is where the collectors were registered; the POST fallback
	// registers its gauges there too.
	Registerer prometheus.Registerer
}

// NewMetrics creates and registers the collectors on reg. A nil reg gets a
// private registry, so that several engines in one process (tests) do not
// collide.
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
	for _, c := range []prometheus.Collector{m.Requests, m.LegacyRequests} {
		if err := reg.Register(c); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
		}
	}
	return m, nil
}

// OutcomeOf names the outcome of a failed write for [Metrics.Requests].
func OutcomeOf(err error) string {
	switch ErrorFor(err).Code {
	case CodeRequestInProgress, CodeOutcomePending:
		return OutcomeInProgress
	case CodeIdempotencyKeyReuse:
		return OutcomeKeyReuse
	case CodeIdempotencyKeyMissing:
		return OutcomeMissingKey
	case CodeUnavailable, CodeInternal:
		return OutcomeError
	}
	return OutcomeRejected
}
