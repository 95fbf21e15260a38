package retrysafetest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/retrysafetest"
)

func start(t *testing.T, cfg retrysafetest.ProxyConfig) (*retrysafetest.Proxy, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, "answer "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	p, err := retrysafetest.StartProxy(strings.TrimPrefix(srv.URL, "http://"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, &served
}

func get(client *http.Client, p *retrysafetest.Proxy, path string) (string, error) {
	res, err := client.Get("http://" + p.Addr() + path)
	if err != nil {
		return "", err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	return string(b), err
}

// TestDropAnswer: a dropped answer was served (the server finished) but
// the client gets nothing; the next one arrives, and the dropped bytes were
// recorded.
func TestDropAnswer(t *testing.T) {
	t.Parallel()
	var dropped atomic.Value
	p, served := start(t, retrysafetest.ProxyConfig{DropAnswerFunc: func(_ *http.Request, answer []byte) bool {
		if dropped.Load() == nil {
			dropped.Store(answer)
			return true
		}
		return false
	}})
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	if _, err := get(client, p, "/x"); err == nil {
		t.Fatal("the first answer reached the client")
	}
	if served.Load() != 1 {
		t.Fatalf("server served %d requests, want 1", served.Load())
	}
	res, body, err := retrysafetest.ReadAnswer(dropped.Load().([]byte))
	if err != nil || res.StatusCode != 200 || string(body) != "answer /x" {
		t.Fatalf("recorded answer: %v %v %q", err, res, body)
	}
	if got, err := get(client, p, "/y"); err != nil || got != "answer /y" {
		t.Fatalf("second request: %q %v", got, err)
	}
}

// TestHoldAndCut: a held proxy forwards nothing until released; a cut one
// refuses until restored.
func TestHoldAndCut(t *testing.T) {
	t.Parallel()
	p, _ := start(t, retrysafetest.ProxyConfig{})
	client := &http.Client{Timeout: 300 * time.Millisecond}
	p.Hold()
	if _, err := get(client, p, "/held"); err == nil {
		t.Fatal("an answer crossed a held proxy")
	}
	p.Release()
	client.Timeout = 5 * time.Second
	if got, err := get(client, p, "/released"); err != nil || got != "answer /released" {
		t.Fatalf("after release: %q %v", got, err)
	}
	p.Cut()
	client.CloseIdleConnections()
	if _, err := get(client, p, "/cut"); err == nil {
		t.Fatal("a cut proxy answered")
	}
	if err := p.Restore(); err != nil {
		t.Fatal(err)
	}
	if got, err := get(client, p, "/restored"); err != nil || got != "answer /restored" {
		t.Fatalf("after restore: %q %v", got, err)
	}
}

// TestStandIn: a stand-in answers in the server's place, on the same
// connection as the answers the server gives; the request never reaches
// the server, and DropAnswerFunc sees the request StandInFunc saw.
func TestStandIn(t *testing.T) {
	t.Parallel()
	var sameRequest atomic.Bool
	var standIns sync.Map
	p, served := start(t, retrysafetest.ProxyConfig{
		StandInFunc: func(r *http.Request) *http.Response {
			standIns.Store(r, true)
			if r.URL.Path != "/busy" {
				return nil
			}
			return &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{"Retry-After": {"1"}},
				Body: io.NopCloser(strings.NewReader("busy")), ContentLength: 4}
		},
		DropAnswerFunc: func(r *http.Request, _ []byte) bool {
			_, ok := standIns.Load(r)
			sameRequest.Store(ok)
			return false
		},
	})
	client := &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1}}
	res, err := client.Get("http://" + p.Addr() + "/busy")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusServiceUnavailable || res.Header.Get("Retry-After") != "1" || string(body) != "busy" || served.Load() != 0 {
		t.Fatalf("stand-in: %d %v %q, the server served %d", res.StatusCode, res.Header, body, served.Load())
	}
	if got, err := get(client, p, "/after"); err != nil || got != "answer /after" || !sameRequest.Load() {
		t.Fatalf("after a stand-in: %q %v, DropAnswerFunc saw StandInFunc's request: %t", got, err, sameRequest.Load())
	}
}

// TestExpectContinue: a client that waits for 100 Continue before its
// body gets it from the proxy at once, and the server gets the body.
func TestExpectContinue(t *testing.T) {
	t.Parallel()
	p, _ := start(t, retrysafetest.ProxyConfig{DropAnswerFunc: func(*http.Request, []byte) bool { return false }})
	client := &http.Client{Transport: &http.Transport{ExpectContinueTimeout: time.Hour}}
	req, _ := http.NewRequest(http.MethodPost, "http://"+p.Addr()+"/continued", strings.NewReader("body"))
	req.Header.Set("Expect", "100-continue")
	res, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	res.Body.Close()
	if res.StatusCode != http.StatusOK || string(body) != "answer /continued" {
		t.Fatalf("%d %q", res.StatusCode, body)
	}
}
