package retrysafetest

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/wire"
)

// request is one request of a check.
type request struct {
	tenant  int
	method  string
	path    string // under Config.URL's path
	located bool   // path is a Location: from the server's root
	key     string // Idempotency-Key
	ifMatch string
	body    []byte
}

// answer is what the service answered.
type answer struct {
	status int
	header http.Header
	body   []byte
}

func (a answer) String() string {
	return fmt.Sprintf("%d %s %s", a.status, a.header.Get(wire.HeaderContentType), truncated(a.body))
}

// code is the problem code of a problem answer.
func (a answer) code() wire.Code {
	var p struct {
		Code wire.Code `json:"code"`
	}
	_ = json.Unmarshal(a.body, &p)
	return p.Code
}

func (k *kit) newRequest(ctx context.Context, r request) (*http.Request, error) {
	var body io.Reader
	if r.body != nil {
		body = bytes.NewReader(r.body)
	}
	target := k.origin + k.prefix + r.path
	if r.located {
		target = k.origin + r.path
	}
	req, err := http.NewRequestWithContext(ctx, r.method, target, body)
	if err != nil {
		return nil, err
	}
	for _, h := range []http.Header{k.cfg.Operation.Header, k.cfg.Tenants[r.tenant].Header} {
		for name, values := range h {
			req.Header[http.CanonicalHeaderKey(name)] = values
		}
	}
	if r.body != nil {
		req.Header.Set(wire.HeaderContentType, k.cfg.Operation.ContentType)
	}
	if r.key != "" {
		req.Header.Set(wire.HeaderIdempotencyKey, r.key)
	}
	if r.ifMatch != "" {
		req.Header.Set(wire.HeaderIfMatch, r.ifMatch)
	}
	return req, nil
}

func (k *kit) send(ctx context.Context, r request) (answer, error) {
	req, err := k.newRequest(ctx, r)
	if err != nil {
		return answer{}, err
	}
	return k.roundTrip(req)
}

func (k *kit) roundTrip(req *http.Request) (answer, error) {
	res, err := k.client.Do(req)
	if err != nil {
		return answer{}, err
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		return answer{}, err
	}
	return answer{status: res.StatusCode, header: res.Header, body: body}, nil
}

// do sends r and stops the check if no answer comes.
func (k *kit) do(ctx context.Context, tb testing.TB, r request) answer {
	tb.Helper()
	a, err := k.send(ctx, r)
	if err != nil {
		tb.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	return a
}

// lose sends r through the proxy, which lets the service answer and
// loses that answer on the way back; it returns the answer lost.
func (k *kit) lose(ctx context.Context, tb testing.TB, r request) answer {
	tb.Helper()
	req, err := k.newRequest(ctx, r)
	if err != nil {
		tb.Fatal(err)
	}
	name, lost := exchange(req), make(chan []byte, 1)
	k.mu.Lock()
	k.drops[name] = lost
	k.mu.Unlock()
	if got, err := k.roundTrip(req); err == nil {
		k.mu.Lock()
		delete(k.drops, name)
		k.mu.Unlock()
		tb.Fatalf("%s %s: the proxy was to lose the answer, but %s came through", r.method, r.path, got)
	}
	select {
	case raw := <-lost:
		res, body, err := ReadAnswer(raw)
		if err != nil {
			tb.Fatalf("%s %s: the answer lost is no HTTP answer: %v", r.method, r.path, err)
		}
		return answer{status: res.StatusCode, header: res.Header, body: body}
	default:
		// The client failed before the proxy had the service's answer.
		k.mu.Lock()
		delete(k.drops, name)
		k.mu.Unlock()
		tb.Fatalf("%s %s: no answer reached the proxy", r.method, r.path)
		return answer{}
	}
}

// converge sends r until its answer is final: a 409 that asks for a
// retry (request_in_progress, outcome_pending) is sent again after a
// short wait, shorter than its Retry-After, until ctx ends. It reports
// how many answers asked for a retry.
func (k *kit) converge(ctx context.Context, r request) (answer, int, error) {
	wait, retried := 5*time.Millisecond, 0
	for {
		a, err := k.send(ctx, r)
		if err != nil {
			return a, retried, err
		}
		if a.status != http.StatusConflict || (a.code() != wire.CodeRequestInProgress && a.code() != wire.CodeOutcomePending) {
			return a, retried, nil
		}
		retried++
		select {
		case <-ctx.Done():
			return a, retried, fmt.Errorf("still %s when the check's time ran out: %w", a, ctx.Err())
		case <-time.After(wait):
		}
		wait = min(2*wait, 200*time.Millisecond)
	}
}
