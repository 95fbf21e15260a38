package telemetry_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/retrysafe/retrysafe/framework/telemetry"
)

// TestMetricsOnTheUsersRegistry: two engines of one process on the
// application's registry count into the same registered series.
func TestMetricsOnTheUsersRegistry(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	a, err := telemetry.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	b, err := telemetry.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	a.Requests.WithLabelValues("put", "notes", telemetry.OutcomeExecuted).Inc()
	b.Requests.WithLabelValues("put", "notes", telemetry.OutcomeExecuted).Inc()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "retrysafe_requests_total" {
			continue
		}
		if len(f.GetMetric()) != 1 || f.GetMetric()[0].GetCounter().GetValue() != 2 {
			t.Fatalf("retrysafe_requests_total = %v, want one series at 2", f.GetMetric())
		}
		return
	}
	t.Fatal("retrysafe_requests_total is not on the registry")
}
