package postkeys

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// scrapeTimeout bounds the queries of one scrape of the gauges.
const scrapeTimeout = 2 * time.Second

// scrapeGauges is the collector of the adapter's gauges: every scrape reads
// the oldest in_progress record and the unknown count from the database, so
// the gauges are current whenever they are looked at, not as of the last
// recovery run. A failed read keeps the previous values and is logged.
type scrapeGauges struct{ a *Adapter }

func registerScrapeGauges(reg prometheus.Registerer, a *Adapter) error {
	if reg == nil {
		return nil
	}
	if err := reg.Register(scrapeGauges{a}); err != nil {
		var already prometheus.AlreadyRegisteredError
		if !errors.As(err, &already) {
			return err
		}
	}
	return nil
}

func (g scrapeGauges) Describe(ch chan<- *prometheus.Desc) {
	g.a.oldestInProgress.Describe(ch)
	g.a.unknownRecords.Describe(ch)
}

func (g scrapeGauges) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	if err := g.a.refreshGauges(ctx); err != nil {
		g.a.logger.LogAttrs(ctx, slog.LevelWarn, "idempotency gauges not refreshed", slog.String("error", err.Error()))
	}
	g.a.oldestInProgress.Collect(ch)
	g.a.unknownRecords.Collect(ch)
}
