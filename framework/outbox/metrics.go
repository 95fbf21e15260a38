package outbox

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrysafe/retrysafe/framework/store"
)

// Metrics are the relay's Prometheus collectors:
//
//   - retrysafe_outbox_published_total, retrysafe_outbox_retried_total and
//     retrysafe_outbox_parked_total count what this relay did;
//   - retrysafe_outbox_lag_seconds (age of the oldest pending event),
//     retrysafe_outbox_pending_events and retrysafe_outbox_parked_events
//     are read from the database at scrape time, so they are true for all
//     relays together and never stale.
type Metrics struct {
	published prometheus.Counter
	retried   prometheus.Counter
	parked    prometheus.Counter
	db        *store.DB
	now       func() time.Time

	lagDesc, pendingDesc, parkedDesc *prometheus.Desc
}

var _ prometheus.Collector = (*Metrics)(nil)

func newMetrics(reg prometheus.Registerer, db *store.DB) (*Metrics, error) {
	m := &Metrics{
		published: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "retrysafe", Subsystem: "outbox",
			Name: "published_total", Help: "Outbox events published by this relay."}),
		retried: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "retrysafe", Subsystem: "outbox",
			Name: "retried_total", Help: "Publish attempts that failed and will be retried (refusals and broker outages)."}),
		parked: prometheus.NewCounter(prometheus.CounterOpts{Namespace: "retrysafe", Subsystem: "outbox",
			Name: "parked_total", Help: "Outbox events parked after too many refusals by this relay."}),
		db:          db,
		now:         time.Now,
		lagDesc:     prometheus.NewDesc("retrysafe_outbox_lag_seconds", "Age of the oldest pending outbox event (0 when none is pending).", nil, nil),
		pendingDesc: prometheus.NewDesc("retrysafe_outbox_pending_events", "Outbox events not yet published (parked ones excluded).", nil, nil),
		parkedDesc:  prometheus.NewDesc("retrysafe_outbox_parked_events", "Outbox events parked and kept for an operator.", nil, nil),
	}
	if reg != nil {
		if err := reg.Register(m); err != nil {
			var already prometheus.AlreadyRegisteredError
			if !errors.As(err, &already) {
				return nil, err
			}
		}
	}
	return m, nil
}

// Describe implements [prometheus.Collector].
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.published.Describe(ch)
	m.retried.Describe(ch)
	m.parked.Describe(ch)
	ch <- m.lagDesc
	ch <- m.pendingDesc
	ch <- m.parkedDesc
}

// Collect implements [prometheus.Collector]; it reads the gauges from the
// database with a 2s bound and leaves them out when the read fails (the
// database is down, for instance). It never fails the scrape: an invalid
// metric would make the registry's handler answer 500, and the process's
// other metrics would be lost exactly during an outage.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.published.Collect(ch)
	m.retried.Collect(ch)
	m.parked.Collect(ch)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := readStats(ctx, m.db)
	if err != nil {
		return
	}
	ch <- prometheus.MustNewConstMetric(m.lagDesc, prometheus.GaugeValue, lag(st.OldestPending, m.now()))
	ch <- prometheus.MustNewConstMetric(m.pendingDesc, prometheus.GaugeValue, float64(st.Pending))
	ch <- prometheus.MustNewConstMetric(m.parkedDesc, prometheus.GaugeValue, float64(st.Parked))
}

func lag(oldest, now time.Time) float64 {
	if oldest.IsZero() {
		return 0
	}
	return max(0, now.Sub(oldest).Seconds())
}

// Lag returns the age of the oldest pending event (0 when none is pending),
// the number of pending events and the number of parked ones, read from the
// database now.
func (r *Relay) Lag(ctx context.Context) (age time.Duration, pending, parked int64, err error) {
	st, err := readStats(ctx, r.db)
	if err != nil {
		return 0, 0, 0, err
	}
	return time.Duration(lag(st.OldestPending, r.cfg.Now()) * float64(time.Second)), st.Pending, st.Parked, nil
}
