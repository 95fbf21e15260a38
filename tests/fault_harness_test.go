package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// envFaultsLong names the variable that runs the long variants of the
// fault suite (tests/fault_*): RETRYSAFE_FAULTS_LONG=1.
const envFaultsLong = "RETRYSAFE_FAULTS_LONG"

// faultScale returns short by default and long under RETRYSAFE_FAULTS_LONG=1.
func faultScale(short, long int) int {
	if os.Getenv(envFaultsLong) == "1" {
		return long
	}
	return short
}

// faultOp is one logical write of a fault test: the same request (same ID
// or key, same body) is sent until it gets a final answer.
type faultOp struct {
	Method, Path, Token, Key string
	Body                     []byte
}

// name identifies the operation across retries.
func (op faultOp) name() string { return op.Method + " " + op.Path + " " + op.Key }

// retryableAnswer reports whether an answer asks for the same request again:
// 409 request_in_progress / outcome_pending, 429 and 503.
func retryableAnswer(r response) bool {
	switch r.Status {
	case http.StatusServiceUnavailable, http.StatusTooManyRequests:
		return true
	case http.StatusConflict:
		var p struct {
			Code string `json:"code"`
		}
		_ = json.Unmarshal(r.Body, &p)
		return p.Code == "request_in_progress" || p.Code == "outcome_pending"
	}
	return false
}

// faultTally counts what the clients of a fault test saw.
type faultTally struct {
	mu        sync.Mutex
	attempts  int
	transport int         // requests that got no answer
	final     int         // operations that got a final answer
	byStatus  map[int]int // every answer, retried or final
}

func (ft *faultTally) add(status int, err error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.attempts++
	if err != nil {
		ft.transport++
		return
	}
	if ft.byStatus == nil {
		ft.byStatus = map[int]int{}
	}
	ft.byStatus[status]++
}

// finals returns how many operations got their final answer.
func (ft *faultTally) finals() int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.final
}

// count returns the answers with a status in [lo, hi].
func (ft *faultTally) count(lo, hi int) int {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	n := 0
	for s, c := range ft.byStatus {
		if s >= lo && s <= hi {
			n += c
		}
	}
	return n
}

func (ft *faultTally) String() string {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return fmt.Sprintf("%d requests, %d without an answer, answers by status %v", ft.attempts, ft.transport, ft.byStatus)
}

// send sends op once to base.
func (op faultOp) send(ctx context.Context, client *http.Client, base string) (response, error) {
	req, err := http.NewRequestWithContext(ctx, op.Method, base+op.Path, bytes.NewReader(op.Body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+op.Token)
	if op.Body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if op.Key != "" {
		req.Header.Set("Idempotency-Key", op.Key)
	}
	res, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// untilFinal sends op until it gets a final answer, to bases[i % len] on
// attempt i, pausing between attempts (Retry-After is honoured up to
// maxPause). It gives up when ctx ends.
func (op faultOp) untilFinal(ctx context.Context, client *http.Client, tally *faultTally, bases ...string) (response, error) {
	const maxPause = 500 * time.Millisecond
	var last error
	for attempt := 0; ; attempt++ {
		r, err := op.send(ctx, client, bases[attempt%len(bases)])
		if ctx.Err() != nil {
			return response{}, fmt.Errorf("%s: no final answer (last: %v): %w", op.name(), last, ctx.Err())
		}
		tally.add(r.Status, err)
		if err == nil && !retryableAnswer(r) {
			tally.mu.Lock()
			tally.final++
			tally.mu.Unlock()
			return r, nil
		}
		last = err
		if err == nil {
			last = fmt.Errorf("%d %s", r.Status, r.Body)
		}
		pause := 20 * time.Millisecond
		if s, perr := strconv.Atoi(r.Header.Get("Retry-After")); perr == nil && s > 0 {
			pause = min(time.Duration(s)*time.Second, maxPause)
		}
		select {
		case <-ctx.Done():
		case <-time.After(pause):
		}
	}
}

// runOps runs ops on workers goroutines, each until its final answer, and
// returns the final answers in the order of ops.
func runOps(ctx context.Context, t *testing.T, ops []faultOp, workers int, client *http.Client, tally *faultTally, bases ...string) []response {
	t.Helper()
	finals := make([]response, len(ops))
	errs := make([]error, len(ops))
	next := make(chan int)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range next {
				// Spread the operations over the processes.
				rotated := append(append([]string{}, bases[(i+w)%len(bases):]...), bases[:(i+w)%len(bases)]...)
				finals[i], errs[i] = ops[i].untilFinal(ctx, client, tally, rotated...)
			}
		})
	}
	for i := range ops {
		next <- i
	}
	close(next)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("operations without a final answer: %v (%s)", err, tally)
	}
	return finals
}

// getJSON reads base+path as token into v.
func getJSON(t *testing.T, client *http.Client, base, path, token string, v any) {
	t.Helper()
	r, err := faultOp{Method: http.MethodGet, Path: path, Token: token}.send(t.Context(), client, base)
	if err != nil {
		t.Fatalf("GET %s: %v", path, err)
	}
	wantStatus(t, r, http.StatusOK)
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("GET %s: %v: %s", path, err, r.Body)
	}
}
