package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"
	"time"
)

// ScaleReport is the outcome of -scale.
type ScaleReport struct {
	Points  []ScalePoint  `json:"points"`
	Janitor *JanitorPoint `json:"janitor,omitempty"`
}

// ScalePoint holds the medians at one table size.
type ScalePoint struct {
	// Rows is how many rows were bulk-loaded into the orders table and into
	// the idempotency records table each.
	Rows                int     `json:"rows"`
	PutCreateReqPerSec  float64 `json:"put_create_req_per_s"`
	PutReplayP99Ms      float64 `json:"put_replay_p99_ms"`
	PostCreateReqPerSec float64 `json:"post_local_create_req_per_s"`
	PostReplayP99Ms     float64 `json:"post_local_replay_p99_ms"`
}

// JanitorPoint compares p99 under mixed transfer load with and without the
// janitor deleting expired records.
type JanitorPoint struct {
	Rows           int     `json:"expired_rows"`
	Deleted        int64   `json:"deleted"`
	Seconds        float64 `json:"janitor_seconds"`
	P99WithoutMs   float64 `json:"p99_without_ms"`
	P99WithMs      float64 `json:"p99_with_ms"`
	Non2xxWith     int     `json:"non_2xx_with"`
	RequestsDuring int     `json:"requests_during"`
	// StatusesWith counts the answers during the janitor by status.
	StatusesWith map[int]int `json:"statuses_with"`
}

func (b *bench) runScale(ctx context.Context) (*ScaleReport, error) {
	scs, err := selectScenarios("put-create,put-replay,post-local-create,post-local-replay", b.db.Dialect)
	if err != nil {
		return nil, err
	}
	for _, sc := range scs {
		if sc.prepare != nil {
			if err := sc.prepare(ctx, b.load, b.o.prefill); err != nil {
				return nil, err
			}
		}
	}
	bulk, err := bulkDB(b.db)
	if err != nil {
		return nil, err
	}
	defer bulk.Close()
	sizes := slices.Clone(b.o.scaleSizes)
	slices.Sort(sizes)
	bar := b.newBar(len(sizes)*b.o.rounds*len(scs)+3, "scale")
	rep := &ScaleReport{}
	loaded := 0
	for _, size := range sizes {
		if size > loaded {
			bar.Describe(fmt.Sprintf("bulk load to %d rows", size))
			err := b.db.unpinned(ctx, func() error {
				if err := bulkOrders(ctx, bulk, b.db.Dialect, "scale", size-loaded); err != nil {
					return err
				}
				if err := bulkRecords(ctx, bulk, b.db.Dialect, size-loaded, fmt.Sprintf("live-%s-%d", b.nonce, size), time.Now().Add(24*time.Hour)); err != nil {
					return err
				}
				return analyze(ctx, bulk, b.db.Dialect)
			})
			if err != nil {
				return nil, err
			}
			loaded = size
		}
		samples := make([][]*sample, len(scs))
		for round := range b.o.rounds {
			for i, sc := range scs {
				bar.Describe(fmt.Sprintf("%d rows, round %d %s", size, round+1, sc.name))
				s, err := b.measure(ctx, sc, b.o.duration)
				if err != nil {
					return nil, err
				}
				samples[i] = append(samples[i], s)
				_ = bar.Add(1)
			}
		}
		res := summarize(scs, samples)
		rep.Points = append(rep.Points, ScalePoint{Rows: size, PutCreateReqPerSec: res[0].ReqPerSec, PutReplayP99Ms: res[1].P99Ms,
			PostCreateReqPerSec: res[2].ReqPerSec, PostReplayP99Ms: res[3].P99Ms})
	}

	// The janitor: a mix of new and replayed transfers, first alone, then
	// while the server's janitor deletes janitor-rows expired records.
	if b.o.janitor > 0 {
		mixed := &scenario{name: "transfers-mixed", next: func(cl *client) request {
			if cl.id%2 == 0 {
				return scs[3].next(cl)
			}
			return scs[2].next(cl)
		}}
		bar.Describe(fmt.Sprintf("bulk load %d expired records", b.o.janitor))
		err := b.db.unpinned(ctx, func() error {
			if err := bulkRecords(ctx, bulk, b.db.Dialect, b.o.janitor, "expired-"+b.nonce, time.Now().Add(-time.Hour)); err != nil {
				return err
			}
			return analyze(ctx, bulk, b.db.Dialect)
		})
		if err != nil {
			return nil, err
		}
		_ = bar.Add(1)
		bar.Describe("janitor off")
		without, err := b.measure(ctx, mixed, b.o.duration)
		if err != nil {
			return nil, err
		}
		_ = bar.Add(1)
		bar.Describe("janitor on")
		type janitorStats struct {
			Deleted int64   `json:"deleted"`
			Seconds float64 `json:"seconds"`
		}
		done := make(chan error, 1)
		var js janitorStats
		go func() { done <- b.post(ctx, "/_bench/janitor", &js) }()
		var with []*sample
		var jerr error
	loop:
		for {
			s, err := b.load.run(ctx, mixed, b.nonce+"j"+fmt.Sprint(len(with)), b.o.duration)
			if err != nil {
				return nil, err
			}
			with = append(with, s)
			select {
			case jerr = <-done:
				break loop
			default:
			}
		}
		if jerr != nil {
			return nil, jerr
		}
		_ = bar.Add(1)
		var all []time.Duration
		jp := &JanitorPoint{Rows: b.o.janitor, Deleted: js.Deleted, Seconds: js.Seconds, P99WithoutMs: percentile(without.Latencies, 0.99),
			StatusesWith: map[int]int{}}
		for _, s := range with {
			all = append(all, s.Latencies...)
			jp.Non2xxWith += s.Non2xx
			for status, n := range s.Statuses {
				jp.StatusesWith[status] += n
			}
		}
		slices.Sort(all)
		jp.P99WithMs, jp.RequestsDuring = percentile(all, 0.99), len(all)
		rep.Janitor = jp
	}
	_ = bar.Finish()
	return rep, nil
}

func printScale(w io.Writer, rep *ScaleReport) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "rows\tput-create req/s\tput-replay p99 ms\tpost-local-create req/s\tpost-local-replay p99 ms\t")
	for _, p := range rep.Points {
		fmt.Fprintf(tw, "%d\t%.0f\t%.2f\t%.0f\t%.2f\t\n", p.Rows, p.PutCreateReqPerSec, p.PutReplayP99Ms, p.PostCreateReqPerSec, p.PostReplayP99Ms)
	}
	_ = tw.Flush()
	if n := len(rep.Points); n > 1 && rep.Points[0].PutReplayP99Ms > 0 && rep.Points[0].PostReplayP99Ms > 0 {
		first, last := rep.Points[0], rep.Points[n-1]
		fmt.Fprintf(w, "replay p99 at %d rows / at %d: PUT %.2f, POST %.2f (target ≤ 1.25)\n", last.Rows, first.Rows,
			last.PutReplayP99Ms/first.PutReplayP99Ms, last.PostReplayP99Ms/first.PostReplayP99Ms)
	}
	if j := rep.Janitor; j != nil {
		fmt.Fprintf(w, "janitor: deleted %d of %d expired records in %.1fs; transfers p99 %.2f ms with it, %.2f ms without: %.2f× (target ≤ 2); %d non-2xx of %d (by status: %v)\n",
			j.Deleted, j.Rows, j.Seconds, j.P99WithMs, j.P99WithoutMs, j.P99WithMs/max(j.P99WithoutMs, 1e-9), j.Non2xxWith, j.RequestsDuring, j.StatusesWith)
	}
}
