package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testlog"
)

// TestRunServesAndShutsDown starts the demo as main does, waits for its one
// ready line, serves a request, and shuts down cleanly on cancel.
func TestRunServesAndShutsDown(t *testing.T) {
	t.Parallel()
	env := map[string]string{"DEMO_API_TOKENS": "tok_a:tenant-a"}
	base, stop := start(t, nil, env, io.Discard)

	put := func(token string) int {
		t.Helper()
		return putOrder(t, base, token, "6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f", "c")
	}
	if got := put("tok_a"); got != http.StatusCreated {
		t.Fatalf("PUT with a DEMO_API_TOKENS token: %d", got)
	}
	if got := put("sk_test_acme"); got != http.StatusUnauthorized {
		t.Fatalf("a default token still works with DEMO_API_TOKENS set: %d", got)
	}

	if err := stop(); err != nil {
		t.Fatalf("run after cancel = %v", err)
	}
}

// start runs the demo as main does with args (on a fresh SQLite file, on
// a free port) and env, waits for its one ready line and returns its base
// URL and a stop function that cancels run and returns what it returned.
func start(t *testing.T, args []string, env map[string]string, stderr io.Writer) (base string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	pr, pw := io.Pipe()
	args = append([]string{"-addr", "127.0.0.1:0", "-db", "sqlite:" + filepath.Join(t.TempDir(), "demo.db")}, args...)
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, args, func(k string) string { return env[k] }, pw, stderr)
		pw.Close()
	}()
	br := bufio.NewReader(pr)
	line, err := br.ReadString('\n')
	for err == nil && strings.HasPrefix(line, waitingLine) {
		line, err = br.ReadString('\n')
	}
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), readyLine+" ")
	if !ok {
		t.Fatalf("ready line = %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	return base, func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(15 * time.Second):
			return errors.New("run did not return after cancel")
		}
	}
}

// TestRequestLogLevelFlag: by default every PUT logs its resource write;
// with -request-log-level debug the log (at info) leaves it out.
func TestRequestLogLevelFlag(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args   []string
		logged bool
	}{{nil, true}, {[]string{"-request-log-level", "debug"}, false}} {
		t.Run(fmt.Sprint(c.args), func(t *testing.T) {
			t.Parallel()
			stderr := &testlog.Buffer{}
			base, stop := start(t, c.args, nil, stderr)
			if got := putOrder(t, base, "sk_test_acme", "6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f", "c"); got != http.StatusCreated {
				t.Fatalf("PUT: %d", got)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Contains(stderr.String(), `"msg":"resource write"`); got != c.logged {
				t.Fatalf("resource write logged = %v, want %v; log:\n%s", got, c.logged, stderr.String())
			}
		})
	}
}

// TestReplayedPutLogsNoError: on SQLite a replayed PUT inserts first and
// finds its ID taken, a unique violation the engine expects: the demo's
// log has no ERROR line for it, and no line of the log carries the
// request's field values.
func TestReplayedPutLogsNoError(t *testing.T) {
	t.Parallel()
	stderr := &testlog.Buffer{}
	base, stop := start(t, nil, nil, stderr)
	const customer = "cus_logged_nowhere_7f3a"
	for i := range 3 {
		if got := putOrder(t, base, "sk_test_acme", "0b5e6c1a-9d7e-4f3b-8a2c-1d4e5f6a7b8c", customer); got != http.StatusCreated {
			t.Fatalf("PUT %d: %d", i, got)
		}
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	out := stderr.String()
	if strings.Count(out, `"outcome":"replayed"`) != 2 {
		t.Fatalf("the log shows no two replays:\n%s", out)
	}
	if strings.Contains(out, `"level":"ERROR"`) || strings.Contains(out, customer) {
		t.Fatalf("a replayed PUT logged an error or a field value:\n%s", out)
	}
}

// putOrder PUTs an order of customer with ID id to the demo at base as
// token and returns the status.
func putOrder(t *testing.T, base, token, id, customer string) int {
	t.Helper()
	req, _ := http.NewRequest("PUT", base+"/v1/orders/"+id,
		strings.NewReader(`{"customer":"`+customer+`","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`))
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	return res.StatusCode
}
