package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"
)

// request is one HTTP request of a scenario.
type request struct {
	method string
	path   string
	body   []byte
	key    string // Idempotency-Key, "" for none
}

// answer is what the load generator keeps of a response.
type answer struct {
	status   int
	replayed bool
	code     string // the problem code of a 409 (hot-key only)
}

// client is one of the -c concurrent clients of a scenario run.
type client struct {
	id  int
	n   int
	rng *rand.Rand
	run string // unique per scenario run: keys and IDs never repeat across runs
	// start is when the run began (hot-key slices time).
	start time.Time
}

// sample is the outcome of one scenario run.
type sample struct {
	Requests  int           `json:"requests"`
	Non2xx    int           `json:"non_2xx"`
	Elapsed   time.Duration `json:"elapsed_ns"`
	Latencies []time.Duration
	Commits   int64 `json:"commits"` // -1 when not measured
	// WALCommits counts write transactions: commit records in the WAL
	// on PostgreSQL, InnoDB's on MariaDB.
	WALCommits int64   `json:"wal_commits"` // -1 when not measured
	CPU        float64 `json:"cpu_s"`       // server CPU seconds, -1 when not measured
	DBCPU      float64 `json:"db_cpu_s"`    // database server CPU seconds, -1 when not measured
	Hot        *hotCounts
	Statuses   map[int]int `json:"statuses"`
}

func (s *sample) reqPerSec() float64 { return float64(s.Requests) / s.Elapsed.Seconds() }

// loader sends scenario requests to a target over keep-alive connections.
type loader struct {
	base    string
	http    *http.Client
	token   string
	clients int
}

func newLoader(base string, clients int) *loader {
	tr := &http.Transport{MaxIdleConns: clients * 2, MaxIdleConnsPerHost: clients * 2, IdleConnTimeout: time.Minute,
		DisableCompression: true}
	return &loader{base: base, http: &http.Client{Transport: tr, Timeout: 60 * time.Second}, token: "sk_test_acme", clients: clients}
}

func (l *loader) do(ctx context.Context, r request, wantCode bool) (answer, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	req, err := http.NewRequestWithContext(ctx, r.method, l.base+r.path, body)
	if err != nil {
		return answer{}, err
	}
	req.Header.Set("Authorization", "Bearer "+l.token)
	if r.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if r.key != "" {
		req.Header.Set("Idempotency-Key", r.key)
	}
	res, err := l.http.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	a := answer{status: res.StatusCode, replayed: res.Header.Get("Idempotent-Replayed") == "true"}
	if wantCode && res.StatusCode >= 300 {
		var p struct {
			Code string `json:"code"`
		}
		_ = json.NewDecoder(res.Body).Decode(&p)
		a.code = p.Code
	}
	_, _ = io.Copy(io.Discard, res.Body)
	return a, nil
}

// must sends r and fails unless it is answered with want.
func (l *loader) must(ctx context.Context, r request, want int) error {
	a, err := l.do(ctx, r, true)
	if err != nil {
		return err
	}
	if a.status != want {
		return fmt.Errorf("bench: %s %s: status %d (%s), want %d", r.method, r.path, a.status, a.code, want)
	}
	return nil
}

// run drives sc with l.clients clients for d.
func (l *loader) run(ctx context.Context, sc *scenario, runID string, d time.Duration) (*sample, error) {
	type part struct {
		lat      []time.Duration
		non2xx   int
		statuses map[int]int
		err      error
	}
	parts := make([]part, l.clients)
	var hot *hotTally
	if sc.hot {
		hot = newHotTally()
	}
	start := time.Now()
	deadline := start.Add(d)
	var wg sync.WaitGroup
	for i := range l.clients {
		wg.Go(func() {
			p := &parts[i]
			p.lat = make([]time.Duration, 0, 1024)
			p.statuses = map[int]int{}
			cl := &client{id: i, rng: rand.New(rand.NewPCG(uint64(i)+1, uint64(start.UnixNano()))), run: runID, start: start}
			for {
				t0 := time.Now()
				if !t0.Before(deadline) || ctx.Err() != nil {
					return
				}
				r := sc.next(cl)
				cl.n++
				a, err := l.do(ctx, r, sc.hot)
				if err != nil {
					p.err = err
					return
				}
				p.lat = append(p.lat, time.Since(t0))
				p.statuses[a.status]++
				if a.status < 200 || a.status > 299 {
					p.non2xx++
				}
				if hot != nil {
					hot.add(r, a)
				}
			}
		})
	}
	wg.Wait()
	s := &sample{Elapsed: time.Since(start), Commits: -1, WALCommits: -1, CPU: -1, DBCPU: -1, Statuses: map[int]int{}}
	for _, p := range parts {
		if p.err != nil {
			return nil, fmt.Errorf("bench: %s: %w", sc.name, p.err)
		}
		s.Latencies = append(s.Latencies, p.lat...)
		s.Non2xx += p.non2xx
		for k, v := range p.statuses {
			s.Statuses[k] += v
		}
	}
	s.Requests = len(s.Latencies)
	slices.Sort(s.Latencies)
	if hot != nil {
		s.Hot = hot.counts()
	}
	return s, nil
}

// percentile of sorted latencies, in milliseconds.
func percentile(sorted []time.Duration, p float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(float64(len(sorted)-1) * p)
	return float64(sorted[i]) / float64(time.Millisecond)
}

// hotCounts classifies the answers of the hot-key scenario, where every
// client sends the same request (same key or ID) at once.
type hotCounts struct {
	Keys int `json:"keys"`
	// Effects counts first executions (one per key is right).
	Effects int `json:"effects"`
	// Replays counts Idempotent-Replayed answers.
	Replays int `json:"replays"`
	// InProgress counts 409 request_in_progress answers.
	InProgress int `json:"in_progress"`
	// Bad counts every other answer, and effects past the first of a key.
	Bad int `json:"bad"`
}

type hotTally struct {
	mu      sync.Mutex
	effects map[string]int
	c       hotCounts
}

func newHotTally() *hotTally { return &hotTally{effects: map[string]int{}} }

func (h *hotTally) add(r request, a answer) {
	h.mu.Lock()
	defer h.mu.Unlock()
	id := r.path + "|" + r.key
	if _, seen := h.effects[id]; !seen {
		h.effects[id] = 0
		h.c.Keys++
	}
	switch {
	case (a.status == http.StatusCreated || a.status == http.StatusOK) && a.replayed:
		h.c.Replays++
	case a.status == http.StatusCreated:
		h.effects[id]++
		if h.effects[id] == 1 {
			h.c.Effects++
		} else {
			h.c.Bad++
		}
	case a.status == http.StatusConflict && a.code == "request_in_progress":
		h.c.InProgress++
	default:
		h.c.Bad++
	}
}

func (h *hotTally) counts() *hotCounts {
	h.mu.Lock()
	defer h.mu.Unlock()
	c := h.c
	return &c
}
