package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func init() { gin.SetMode(gin.TestMode) }

type env struct {
	t   *testing.T
	srv *httptest.Server
	svc *service
}

// setup serves the example over real HTTP on a fresh database.
func setup(t *testing.T, dsn string) *env {
	t.Helper()
	// Concurrent retries of one key queue on the account's row: a
	// minute's lock and statement timeouts keep how long the last one
	// waits on a loaded machine out of the verdict.
	svc, err := newService(context.Background(), dsn, map[string]string{"tok_a": "acme", "tok_b": "globex"},
		slog.New(slog.DiscardHandler), store.Config{LockTimeout: time.Minute, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	srv := httptest.NewServer(svc.Handler)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, svc: svc}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (e *env) do(method, path, token, key, contentType, body string) answer {
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode >= 500 {
		panic("a 500 answer: " + string(b))
	}
	return answer{status: res.StatusCode, header: res.Header, body: string(b)}
}

func (e *env) post(key, body string) answer {
	return e.do(http.MethodPost, "/v1/credits", "tok_a", key, "application/json", body)
}

func (e *env) balance(token, account string) int64 {
	e.t.Helper()
	a := e.do(http.MethodGet, "/v1/accounts/"+account, token, "", "", "")
	if a.status != http.StatusOK {
		e.t.Fatalf("GET account: %d %s", a.status, a.body)
	}
	var acc struct{ Balance int64 }
	if err := json.Unmarshal([]byte(a.body), &acc); err != nil {
		e.t.Fatal(err)
	}
	return acc.Balance
}

func (e *env) count(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.svc.db.Gorm.Raw(query, args...).Scan(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

func code(t *testing.T, a answer) string {
	t.Helper()
	var p struct{ Code string }
	if err := json.Unmarshal([]byte(a.body), &p); err != nil || a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("not a problem: %d %v %s", a.status, a.header, a.body)
	}
	return p.Code
}

// A retried credit or debit moves the balance once; the retry replays the
// first answer byte for byte.
func TestRetriedCreditAndDebitMoveOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		first := e.post("credit-1", `{"account":"alice","amount":500}`)
		retry := e.post("credit-1", `{"amount":5e2,"account":"alice"}`)
		if first.status != http.StatusCreated || retry.status != http.StatusCreated || retry.body != first.body ||
			retry.header.Get("Idempotent-Replayed") != "true" || retry.header.Get("Idempotency-Key") != "credit-1" {
			t.Fatalf("credit: %+v, retry %+v", first, retry)
		}
		debit := e.post("debit-1", `{"account":"alice","amount":-200}`)
		again := e.post("debit-1", `{"account":"alice","amount":-200}`)
		if debit.status != http.StatusCreated || again.body != debit.body || again.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("debit: %+v, retry %+v", debit, again)
		}
		// Concurrent retries of one credit: one effect.
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				if a := e.post("credit-2", `{"account":"alice","amount":1000}`); a.status != http.StatusCreated {
					t.Errorf("concurrent retry: %d %s", a.status, a.body)
				}
			})
		}
		wg.Wait()
		if b := e.balance("tok_a", "alice"); b != 1300 {
			t.Fatalf("balance = %d, want 500 - 200 + 1000", b)
		}
		if n := e.count("SELECT count(*) FROM credit_entries"); n != 3 {
			t.Fatalf("entries = %d, want 3", n)
		}
		// The same key with another command is refused, nothing moves.
		if a := e.post("credit-1", `{"account":"alice","amount":501}`); a.status != http.StatusUnprocessableEntity || code(t, a) != "idempotency_key_reuse" {
			t.Fatalf("key reuse: %d %s", a.status, a.body)
		}
		// Another tenant has its own accounts.
		if a := e.do(http.MethodGet, "/v1/accounts/alice", "tok_b", "", "", ""); a.status != http.StatusNotFound || code(t, a) != "not_found" {
			t.Fatalf("other tenant: %d %s", a.status, a.body)
		}
	})
}

// insufficient_funds, the service's own code, is answered with its
// registered status, stored under the key and replayed byte for byte.
func TestInsufficientFundsIsStoredAndReplayed(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		if a := e.post("credit-1", `{"account":"bob","amount":100}`); a.status != http.StatusCreated {
			t.Fatalf("credit: %d %s", a.status, a.body)
		}
		first := e.post("debit-big", `{"account":"bob","amount":-250}`)
		if first.status != http.StatusUnprocessableEntity || code(t, first) != "insufficient_funds" ||
			first.header.Get("Retry-After") != "" {
			t.Fatalf("debit: %d %v %s", first.status, first.header, first.body)
		}
		// The balance changes; the key's answer does not.
		if a := e.post("credit-2", `{"account":"bob","amount":1000}`); a.status != http.StatusCreated {
			t.Fatalf("credit: %d %s", a.status, a.body)
		}
		retry := e.post("debit-big", `{"account":"bob","amount":-250}`)
		if retry.status != first.status || retry.body != first.body || retry.header.Get("Idempotent-Replayed") != "true" ||
			retry.header.Get("Content-Type") != first.header.Get("Content-Type") {
			t.Fatalf("replay: %d %v %s, want %s", retry.status, retry.header, retry.body, first.body)
		}
		if b := e.balance("tok_a", "bob"); b != 1100 {
			t.Fatalf("balance = %d, want 1100", b)
		}
		if n := e.count("SELECT count(*) FROM idempotency_records WHERE idem_key = ? AND error_code = ?", "debit-big", "insufficient_funds"); n != 1 {
			t.Fatalf("stored rejections = %d, want 1", n)
		}
		// A debit of an account that does not exist is the same rejection.
		if a := e.post("debit-none", `{"account":"nobody","amount":-1}`); code(t, a) != "insufficient_funds" {
			t.Fatalf("debit of a missing account: %d %s", a.status, a.body)
		}
	})
}

// Requests refused before execution store nothing and answer problems.
func TestRefusedRequestsStoreNothing(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		cases := []struct {
			a      answer
			status int
			code   string
		}{
			{e.do(http.MethodPost, "/v1/credits", "", "k1", "application/json", `{"account":"a","amount":1}`), 401, "unauthenticated"},
			{e.do(http.MethodPost, "/v1/credits", "tok_a", "k2", "text/plain", `{"account":"a","amount":1}`), 415, "unsupported_media_type"},
			{e.do(http.MethodPost, "/v1/credits", "tok_a", "k3", "application/json", `{"account":"a","amount":0}`), 400, "validation_failed"},
			{e.do(http.MethodPost, "/v1/credits", "tok_a", "", "application/json", `{"account":"a","amount":1}`), 400, "idempotency_key_missing"},
			{e.do(http.MethodPost, "/v1/credits", "tok_a", "bad key", "application/json", `{"account":"a","amount":1}`), 400, "idempotency_key_invalid"},
			{e.do(http.MethodGet, "/v1/nowhere", "tok_a", "", "", ""), 404, "not_found"},
			{e.do(http.MethodDelete, "/v1/credits", "tok_a", "", "", ""), 405, "method_not_allowed"},
		}
		for _, c := range cases {
			if c.a.status != c.status || code(t, c.a) != c.code {
				t.Fatalf("want %d %s, got %d %s", c.status, c.code, c.a.status, c.a.body)
			}
		}
		if got := cases[0].a.header.Get("WWW-Authenticate"); got != "Bearer" {
			t.Fatalf("401 WWW-Authenticate = %q", got)
		}
		if n := e.count("SELECT count(*) FROM idempotency_records"); n != 0 {
			t.Fatalf("records = %d, want none", n)
		}
		if n := e.count("SELECT count(*) FROM credit_entries"); n != 0 {
			t.Fatalf("entries = %d, want none", n)
		}
	})
}

// TestKeepsItsPromises runs retrysafe's test kit on POST /v1/credits:
// lost answers, concurrent retries, another body with the key, member
// names spelled otherwise, another tenant. One credit is one entry.
func TestKeepsItsPromises(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		retrysafetest.Run(t, retrysafetest.Config{
			Handler: e.svc.Handler,
			Tenants: [2]retrysafetest.Tenant{retrysafetest.Bearer("acme", "tok_a"), retrysafetest.Bearer("globex", "tok_b")},
			Operation: retrysafetest.Operation{Kind: retrysafetest.PostWithKey, Path: "/v1/credits",
				Body: []byte(`{"account":"alice","amount":500}`), OtherBody: []byte(`{"account":"alice","amount":501}`)},
			CountFunc: func(ctx context.Context, tenant string) (n int64, err error) {
				err = e.svc.db.Gorm.WithContext(ctx).Raw("SELECT count(*) FROM credit_entries WHERE tenant_id = ?", tenant).Scan(&n).Error
				return n, err
			},
		})
	})
}

// TestRun starts the program as the README runs it and sends one request.
func TestRun(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "credits.db")
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", dsn}, func(string) string { return "" }, pw)
		_ = pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var url string
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "credits listening on "); ok {
			url = rest
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" {
		t.Fatal("no listening line")
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/credits", strings.NewReader(`{"account":"alice","amount":500}`))
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	req.Header.Set("Idempotency-Key", "credit-1")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		t.Fatalf("POST: %d", res.StatusCode)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
