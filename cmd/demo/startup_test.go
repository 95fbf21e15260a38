package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/pgtemp"
)

// TestStartsBeforeItsDatabase starts the demo while its PostgreSQL is down,
// as a supervisor may: /healthz answers at once, /readyz and requests 503
// unavailable with Retry-After, and its first line says it waits for the
// database (before, it printed nothing until it was ready); once the
// database is up the demo connects, migrates, prints its ready line, and
// serves (readyz 200, a PUT 201).
func TestStartsBeforeItsDatabase(t *testing.T) {
	t.Parallel()
	pg := pgtemp.Start(t)
	dsn := pg.CreateDatabase("demo")
	pg.Kill()

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	base := "http://" + addr

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"-addr", addr, "-db", dsn}, func(string) string { return "" }, pw, io.Discard)
		pw.Close()
	}()
	lines := make(chan string, 2)
	go func() {
		br := bufio.NewReader(pr)
		for range 2 {
			line, _ := br.ReadString('\n')
			lines <- line
		}
		_, _ = io.Copy(io.Discard, pr)
	}()

	send := func(method, path string) *http.Response {
		t.Helper()
		req, _ := http.NewRequest(method, base+path,
			strings.NewReader(`{"customer":"c","currency":"EUR","items":[{"sku":"s","quantity":1,"unit_price":"1"}]}`))
		req.Header.Set("Authorization", "Bearer sk_test_acme")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", method, path, err)
		}
		_, _ = io.Copy(io.Discard, res.Body)
		res.Body.Close()
		return res
	}
	// The demo listens at once; wait for the socket (nothing else ends
	// this wait: the database is down).
	for {
		res, err := http.Get(base + "/healthz")
		if err == nil {
			res.Body.Close()
			if res.StatusCode != http.StatusOK {
				t.Fatalf("/healthz before the database = %d, want 200", res.StatusCode)
			}
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the demo exited while its database was down: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	for _, path := range []string{"/readyz", "/v1/orders/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"} {
		method := http.MethodGet
		if path != "/readyz" {
			method = http.MethodPut
		}
		req, _ := http.NewRequest(method, base+path, nil)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var problem struct{ Code string }
		_ = json.NewDecoder(res.Body).Decode(&problem)
		res.Body.Close()
		if res.StatusCode != http.StatusServiceUnavailable || problem.Code != "unavailable" ||
			res.Header.Get("Retry-After") == "" || res.Header.Get("Content-Type") != "application/problem+json" {
			t.Fatalf("%s %s before the database = %d %q, Retry-After %q, Content-Type %q; want 503 unavailable problem with Retry-After",
				method, path, res.StatusCode, problem.Code, res.Header.Get("Retry-After"), res.Header.Get("Content-Type"))
		}
	}
	// The first attempt to connect fails at once (connection refused);
	// the minute only bounds a demo that never says so.
	select {
	case line := <-lines:
		if !strings.HasPrefix(line, waitingLine+" (") || !strings.Contains(line, base) {
			t.Fatalf("first line while the database is down = %q, want the waiting line", line)
		}
	case err := <-done:
		t.Fatalf("the demo exited while its database was down: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("no waiting line while the database is down")
	}
	select {
	case line := <-lines:
		t.Fatalf("line %q printed before the database was up", line)
	default:
	}

	pg.Restart()
	if line := <-lines; !strings.HasPrefix(line, readyLine+" "+base) {
		t.Fatalf("ready line = %q", line)
	}
	if res := send(http.MethodGet, "/readyz"); res.StatusCode != http.StatusOK {
		t.Fatalf("/readyz once the database is up = %d", res.StatusCode)
	}
	if res := send(http.MethodPut, "/v1/orders/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"); res.StatusCode != http.StatusCreated {
		t.Fatalf("PUT once the database is up = %d", res.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("run after cancel = %v", err)
	}
}
