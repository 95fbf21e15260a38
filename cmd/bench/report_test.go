package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestRatio(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name                      string
		rps, base                 []float64
		medianOfRounds, ofMedians float64
	}{
		{"one round", []float64{900}, []float64{1000}, 0.9, 0.9},
		{"steady machine", []float64{900, 1800, 2700}, []float64{1000, 2000, 3000}, 0.9, 0.9},
		// The machine slows down from round to round: each round the
		// scenario beats the baseline it ran next to, but its median
		// round is slower than the baseline's median round.
		{"machine slowing down", []float64{3330, 2220, 1110}, []float64{3000, 2600, 1000}, 1.11, 2220.0 / 2600},
		{"even rounds", []float64{100, 300}, []float64{200, 200}, 1.0, 1.0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got := ratio("naive", tc.rps, tc.base)
			if got.Baseline != "naive" || math.Abs(got.MedianOfRounds-tc.medianOfRounds) > 1e-9 || math.Abs(got.OfMedians-tc.ofMedians) > 1e-9 {
				t.Fatalf("ratio(%v, %v) = %+v, want median of rounds %v, of medians %v", tc.rps, tc.base, got, tc.medianOfRounds, tc.ofMedians)
			}
		})
	}
}

// chartReport is a report of a few scenarios whose latencies span three
// orders of magnitude.
func chartReport() *Report {
	rep := &Report{Machine: Machine{Database: "PostgreSQL 15"}, Config: reportConfig{Clients: 32, Rounds: 3, Duration: "3s"}}
	for _, r := range []Result{
		{Scenario: "naive", ReqPerSec: 3754, P50Ms: 7.68, P99Ms: 21.5},
		{Scenario: "put-create", ReqPerSec: 3383, P50Ms: 8.43, P99Ms: 24.3, Ratios: []Ratio{{"naive", 0.91, 0.90}}},
		{Scenario: "legacy-post-replay", ReqPerSec: 9618, P50Ms: 2.62, P99Ms: 12.5, Ratios: []Ratio{{"naive", 2.59, 2.56}}},
		{Scenario: "transfers-hot", ReqPerSec: 904, P50Ms: 23.0, P99Ms: 175, Ratios: []Ratio{{"naive", 0.24, 0.24}}},
	} {
		rep.Results = append(rep.Results, r)
	}
	return rep
}

func TestChartNamesGenericFontAndValues(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "bench.svg")
	if err := drawChart(path, chartReport()); err != nil {
		t.Fatal(err)
	}
	svg, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n, m := bytes.Count(svg, []byte("font-family:")), bytes.Count(svg, []byte("font-family:"+fontFamilies+";")); n == 0 || n != m {
		t.Fatalf("%d of %d texts name %q", m, n, fontFamilies)
	}
	for _, want := range []string{">3754<", ">904<", ">2.62<", ">175<", ">p50<", ">p99<", ">legacy-post-replay<"} {
		if !bytes.Contains(svg, []byte(want)) {
			t.Errorf("the chart lacks %s", want)
		}
	}
}

func TestTableLabelsBothRatios(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	printTable(&b, chartReport())
	for _, want := range []string{"× naive, rounds", "× naive, medians", "0.91", "0.90", "median over the rounds", "ratio of the medians"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("the table lacks %q:\n%s", want, b.String())
		}
	}
}
