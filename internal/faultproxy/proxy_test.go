package faultproxy_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/faultproxy"
)

func start(t *testing.T, cfg faultproxy.Config) (*faultproxy.Proxy, *atomic.Int64) {
	t.Helper()
	var served atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		served.Add(1)
		_, _ = io.WriteString(w, "answer "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	p, err := faultproxy.Start(strings.TrimPrefix(srv.URL, "http://"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return p, &served
}

func get(client *http.Client, p *faultproxy.Proxy, path string) (string, error) {
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
	p, served := start(t, faultproxy.Config{DropAnswerFunc: func(_ *http.Request, answer []byte) bool {
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
	res, body, err := faultproxy.ReadAnswer(dropped.Load().([]byte))
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
	p, _ := start(t, faultproxy.Config{})
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
