package tests

import (
	"bytes"
	"context"
	"net/http"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// answerCutter drops the first cuts final answers of every operation at
// the proxy, after the server answered (and so committed), keeping the
// bytes of the first one. Answers that ask for a retry (409
// request_in_progress, 503) commit nothing and pass through uncounted.
type answerCutter struct {
	cuts    int
	mu      sync.Mutex
	seen    map[string]int // final answers
	passing int            // retryable answers let through
	first   map[string][]byte
}

func (c *answerCutter) drop(req *http.Request, answer []byte) bool {
	op := req.Method + " " + req.URL.Path + " " + req.Header.Get("Idempotency-Key")
	res, body, err := retrysafetest.ReadAnswer(answer)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && retryableAnswer(response{Status: res.StatusCode, Header: res.Header, Body: body}) {
		c.passing++
		return false
	}
	c.seen[op]++
	if c.seen[op] == 1 {
		c.first[op] = answer
	}
	return c.seen[op] <= c.cuts
}

// TestFaultLostResponseStorm: a proxy between the clients and the API cuts
// every operation's first two answers after the server committed. Each of
// 300 operations (1,000 with RETRYSAFE_FAULTS_LONG=1) mixing PUT orders,
// payments and transfers is retried with the same ID or key until answered:
// each has exactly one effect (rows, events, charges, balances), and its
// final answer is byte for byte the first one the server sent.
func TestFaultLostResponseStorm(t *testing.T) {
	t.Parallel()
	n := faultScale(300, 1000)
	testdb.Run(t, func(t *testing.T, dsn string) {
		// The real clock and a short lease: an attempt that fails after its
		// claim (a lock timeout on a slow SQLite) leaves its record until the
		// lease ends, and a retry must then be able to take it over.
		e := newEnv(t, dsn, func(c *app.Config) {
			c.Now = nil
			c.PostKeys.LeaseDuration = 5 * time.Second
		})
		cutter := &answerCutter{cuts: 2, seen: map[string]int{}, first: map[string][]byte{}}
		u, err := url.Parse(e.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		proxy, err := retrysafetest.StartProxy(u.Host, retrysafetest.ProxyConfig{DropAnswerFunc: cutter.drop})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Close)

		w := newWorkload(n, "storm", 1)
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		tally := &faultTally{}
		finals := runOps(ctx, t, w.ops, 8, client, tally, "http://"+proxy.Addr())
		w.wantFinals(t, finals)

		for i, op := range w.ops {
			name := op.Method + " " + op.Path + " " + op.Key
			if got := cutter.seen[name]; got != 3 {
				t.Fatalf("%s: %d final answers at the proxy, want 3 (two cut, one delivered)", name, got)
			}
			res, body, err := retrysafetest.ReadAnswer(cutter.first[name])
			if err != nil {
				t.Fatalf("%s: first answer: %v", name, err)
			}
			final := finals[i]
			if res.StatusCode != final.Status || !bytes.Equal(body, final.Body) {
				t.Fatalf("%s: final answer differs from the first:\n%d %s\nfirst %d %s", name, final.Status, final.Body, res.StatusCode, body)
			}
			for _, h := range []string{"Content-Type", "Location", "ETag"} {
				if res.Header.Get(h) != final.Header.Get(h) {
					t.Fatalf("%s: %s = %q, first %q", name, h, final.Header.Get(h), res.Header.Get(h))
				}
			}
			if final.Header.Get("Idempotent-Replayed") != "true" {
				t.Fatalf("%s: the answer after two lost ones is not a replay: %v", name, final.Header)
			}
		}
		w.wantEffects(t, e.app.DB.Gorm, finals)
		if n := e.count(idempotencyTable, "state <> ?", "completed"); n != 0 {
			t.Fatalf("%d idempotency records not completed", n)
		}
		if got := tally.count(500, 599); got != 0 {
			t.Fatalf("5xx answers: %d (%s)", got, tally)
		}
		t.Logf("lost-response storm: %d operations, %d answers cut, %d asking for a retry; 0 duplicates, 0 lost; %s", n, 2*n, cutter.passing, tally)
	})
}
