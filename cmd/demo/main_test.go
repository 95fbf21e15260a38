package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunServesAndShutsDown starts the demo as main does, waits for its one
// ready line, serves a request, and shuts down cleanly on cancel.
func TestRunServesAndShutsDown(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	dbPath := filepath.Join(t.TempDir(), "demo.db")
	env := map[string]string{"DEMO_API_TOKENS": "tok_a:tenant-a"}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", "sqlite:" + dbPath}, func(k string) string { return env[k] }, pw, io.Discard)
		pw.Close()
	}()
	line, err := bufio.NewReader(pr).ReadString('\n')
	if err != nil {
		t.Fatalf("no ready line: %v", err)
	}
	base, ok := strings.CutPrefix(strings.TrimSpace(line), "retrysafe demo listening on ")
	if !ok {
		t.Fatalf("ready line = %q", line)
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()

	put := func(token string) int {
		t.Helper()
		req, _ := http.NewRequest("PUT", base+"/v1/orders/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
			strings.NewReader(`{"customer":"c","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}
	if got := put("tok_a"); got != http.StatusCreated {
		t.Fatalf("PUT with a DEMO_API_TOKENS token: %d", got)
	}
	if got := put("sk_test_acme"); got != http.StatusUnauthorized {
		t.Fatalf("a default token still works with DEMO_API_TOKENS set: %d", got)
	}

	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run after cancel = %v", err)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("run did not return after cancel")
	}
}
