package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// SoakReport is the outcome of -soak: the server's RSS and goroutines
// sampled under mixed load.
type SoakReport struct {
	Duration string       `json:"duration"`
	Requests int          `json:"requests"`
	Non2xx   int          `json:"non_2xx"`
	Samples  []SoakSample `json:"samples"`
	// RSSGrowth is the RSS at the end over the RSS after warm-up (the
	// first fifth of the soak), minus one.
	RSSGrowth float64 `json:"rss_growth"`
}

// SoakSample is one look at the server.
type SoakSample struct {
	Seconds    float64 `json:"s"`
	RSSBytes   int64   `json:"rss_bytes"`
	Goroutines int     `json:"goroutines"`
	ReqPerSec  float64 `json:"req_per_s"`
}

// runSoak sends every scenario's requests, one after another per client
// (hot-key and the naive baseline left out), in slices of 5 s, sampling the
// server after each slice.
func (b *bench) runSoak(ctx context.Context) (*SoakReport, error) {
	all, err := selectScenarios("", b.db.Dialect)
	if err != nil {
		return nil, err
	}
	var mix []*scenario
	for _, sc := range all {
		if sc.hot || sc.name == "naive" || sc.name == "naive-get" {
			continue
		}
		if sc.prepare != nil {
			if err := sc.prepare(ctx, b.load, b.o.prefill); err != nil {
				return nil, err
			}
		}
		mix = append(mix, sc)
	}
	mixed := &scenario{name: "soak", next: func(cl *client) request { return mix[(cl.id+cl.n)%len(mix)].next(cl) }}
	const slice = 5 * time.Second
	rep := &SoakReport{Duration: b.o.soak.String()}
	bar := b.newBar(int(b.o.soak/slice)+1, "soak")
	start := time.Now()
	for i := 0; time.Since(start) < b.o.soak; i++ {
		s, err := b.load.run(ctx, mixed, b.nonce+"s"+fmt.Sprint(i), min(slice, b.o.soak))
		if err != nil {
			return nil, err
		}
		st, err := b.stats(ctx)
		if err != nil {
			return nil, err
		}
		rep.Requests += s.Requests
		rep.Non2xx += s.Non2xx
		rep.Samples = append(rep.Samples, SoakSample{Seconds: time.Since(start).Seconds(), RSSBytes: st.RSSBytes,
			Goroutines: st.Goroutines, ReqPerSec: s.reqPerSec()})
		_ = bar.Add(1)
	}
	_ = bar.Finish()
	if n := len(rep.Samples); n > 0 {
		warm := rep.Samples[n/5]
		rep.RSSGrowth = float64(rep.Samples[n-1].RSSBytes)/float64(warm.RSSBytes) - 1
	}
	return rep, nil
}

func printSoak(w io.Writer, rep *SoakReport) {
	fmt.Fprintf(w, "soak %s: %d requests, %d non-2xx\n", rep.Duration, rep.Requests, rep.Non2xx)
	for _, s := range rep.Samples {
		fmt.Fprintf(w, "%7.0fs  RSS %6.1f MiB  goroutines %4d  %6.0f req/s\n", s.Seconds, float64(s.RSSBytes)/(1<<20), s.Goroutines, s.ReqPerSec)
	}
	fmt.Fprintf(w, "RSS growth after warm-up: %+.1f%% (target < 10%%)\n", rep.RSSGrowth*100)
}
