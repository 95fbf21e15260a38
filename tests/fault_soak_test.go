package tests

import (
	"bufio"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestFaultSoak runs one demo process on a pg_auto_failover formation
// under the mixed load of [TestFaultFailover] (orders PUT, payments phased
// POST, transfers local POST, each retried with its ID or key until a
// final answer) for 90 seconds (30 minutes with RETRYSAFE_FAULTS_LONG=1),
// with three faults on the way: the formation restarted at a quarter of
// the run, the primary killed at half, the formation restarted at three
// quarters. The process is never restarted. It samples the process's
// resident memory and goroutines (its /metrics) every 1/40 of the run and
// expects: the median RSS of the last fifth of the run less than 10% above
// the median of the second fifth (after warm-up); the goroutines as flat
// (the last fifth's median at most 10% + 10 above the second fifth's); and,
// as the failover test, every operation answered once with one effect (no
// duplicate, no loss), byte-identical replays (every tenth operation in
// the long run), and no 5xx other than 503 unavailable with Retry-After.
func TestFaultSoak(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	h := startHALoad(ctx, t, 4)
	f, proc, seen, tally := h.f, h.proc, h.seen, h.tally
	run := time.Duration(faultScale(90, 1800)) * time.Second

	start := time.Now()
	var samples []soakSample
	var sampling sync.WaitGroup
	stopSampling := make(chan struct{})
	sampling.Go(func() {
		tick := time.NewTicker(run / 40)
		defer tick.Stop()
		for {
			select {
			case <-stopSampling:
				return
			case <-tick.C:
			}
			s, err := sampleProcess(http.DefaultClient, proc.URL())
			if err != nil {
				t.Errorf("sample the process: %v", err)
				return
			}
			s.at = time.Since(start)
			s.finals = tally.finals()
			samples = append(samples, s)
		}
	})

	type fault struct {
		at   time.Duration
		kind string
		took time.Duration
		note string
	}
	faults := []fault{{at: run / 4, kind: "restart"}, {at: run / 2, kind: "kill primary"}, {at: 3 * run / 4, kind: "restart"}}
	for i := range faults {
		fa := &faults[i]
		select {
		case <-time.After(time.Until(start.Add(fa.at))):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		at := time.Now()
		from := f.Primary()
		switch fa.kind {
		case "restart":
			down := f.Restart()
			fa.note = fmt.Sprintf("%s stays the primary; it took no writes for %s", from.Name, down.Round(10*time.Millisecond))
		case "kill primary":
			// The killed node rejoins only once a write sent after
			// the kill went through, so on the promoted standby:
			// rejoined earlier, it would come back as the primary it
			// was.
			killed := f.KillPrimary()
			first := seen.writeSentAfter(ctx, t, time.Now())
			if f.Primary() == from {
				t.Fatalf("%s is still the primary after its kill", from.Name)
			}
			f.Rejoin(killed)
			f.WaitReplicated()
			fa.note = fmt.Sprintf("%s → %s; first write %s after the kill", from.Name, f.Primary().Name, first.Sub(at).Round(10*time.Millisecond))
		}
		fa.took = time.Since(at)
		fa.note += "; answers during the fault: " + seen.between(at, at.Add(fa.took))
	}
	select {
	case <-time.After(time.Until(start.Add(run))):
	case <-ctx.Done():
		t.Fatal(ctx.Err())
	}
	close(stopSampling)
	sampling.Wait()
	// The acknowledged rows: wantAcked, in chunks. Every operation
	// replays byte for byte (every tenth in the long run, whose
	// operations number hundreds of thousands).
	w := h.stop(ctx, t, nil, false, faultScale(1, 10))

	var b strings.Builder
	fmt.Fprintf(&b, "%s, %d operations (%d orders, %d payments, %d transfers), 0 duplicates, 0 lost; %s; all 5xx: %s\n",
		run, len(w.ops), len(w.orders), w.payments, w.transfers, tally, seen.fiveXX())
	for _, fa := range faults {
		fmt.Fprintf(&b, "%s at %s (%s): %s\n", fa.kind, fa.at, fa.took.Round(100*time.Millisecond), fa.note)
	}
	for _, s := range samples {
		fmt.Fprintf(&b, "%6.0fs  RSS %6.1f MiB  heap in use %6.1f MiB  goroutines %4d  operations %d\n",
			s.at.Seconds(), s.rss/(1<<20), s.heap/(1<<20), s.goroutines, s.finals)
	}
	warm, last := soakWindow(samples, 1), soakWindow(samples, 4)
	rssGrowth := median(last, func(s soakSample) float64 { return s.rss })/median(warm, func(s soakSample) float64 { return s.rss }) - 1
	gWarm := median(warm, func(s soakSample) float64 { return float64(s.goroutines) })
	gLast := median(last, func(s soakSample) float64 { return float64(s.goroutines) })
	fmt.Fprintf(&b, "RSS growth after warm-up (median of the last fifth over the second fifth): %+.1f%%; goroutines %.0f → %.0f", rssGrowth*100, gWarm, gLast)
	t.Log("soak:\n" + b.String())
	if rssGrowth >= 0.10 {
		t.Errorf("RSS grew %+.1f%% after warm-up, want < 10%%", rssGrowth*100)
	}
	if gLast > gWarm*1.1+10 {
		t.Errorf("goroutines grew from %.0f to %.0f", gWarm, gLast)
	}
}

// soakSample is one look at the demo process.
type soakSample struct {
	at         time.Duration
	rss, heap  float64 // bytes
	goroutines int
	finals     int // operations with their final answer so far
}

// sampleProcess reads the process's RSS, heap in use and goroutines from
// its /metrics (the Go and process collectors).
func sampleProcess(client *http.Client, base string) (soakSample, error) {
	res, err := client.Get(base + "/metrics")
	if err != nil {
		return soakSample{}, err
	}
	defer res.Body.Close()
	var s soakSample
	found := 0
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(name, "#") {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		switch name {
		case "process_resident_memory_bytes":
			s.rss = v
		case "go_memstats_heap_inuse_bytes":
			s.heap = v
		case "go_goroutines":
			s.goroutines = int(v)
		default:
			continue
		}
		found++
	}
	if err := sc.Err(); err != nil {
		return soakSample{}, err
	}
	if found != 3 {
		return soakSample{}, fmt.Errorf("/metrics lacks process_resident_memory_bytes, go_memstats_heap_inuse_bytes or go_goroutines")
	}
	return s, nil
}

// soakWindow returns the k-th fifth (0 to 4) of the samples.
func soakWindow(samples []soakSample, k int) []soakSample {
	n := len(samples)
	return samples[k*n/5 : (k+1)*n/5]
}

func median(samples []soakSample, v func(soakSample) float64) float64 {
	if len(samples) == 0 {
		return 0
	}
	vs := make([]float64, len(samples))
	for i, s := range samples {
		vs[i] = v(s)
	}
	slices.Sort(vs)
	return vs[len(vs)/2]
}
