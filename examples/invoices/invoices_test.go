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

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/internal/redocly"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func init() { gin.SetMode(gin.TestMode) }

type env struct {
	t   *testing.T
	srv *httptest.Server
	svc *service
}

// setup serves the example over real HTTP on a fresh database; the
// billing service loses the first answer of every call whose request
// mentions "lost".
func setup(t *testing.T, dsn string) *env {
	t.Helper()
	svc, err := newService(context.Background(), dsn, map[string]string{"tok_a": "acme", "tok_b": "globex"},
		slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = svc.Close() })
	svc.billing.loseAnswer = func(c BillingCall) bool { return strings.Contains(c.Request, "lost") }
	srv := httptest.NewServer(svc.Handler)
	t.Cleanup(srv.Close)
	return &env{t: t, srv: srv, svc: svc}
}

type answer struct {
	status int
	header http.Header
	body   string
}

func (e *env) do(method, path, token, key, body string) answer {
	req, err := http.NewRequest(method, e.srv.URL+path, strings.NewReader(body))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
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

func (e *env) count(query string, args ...any) int64 {
	e.t.Helper()
	var n int64
	if err := e.svc.db.Gorm.Raw(query, args...).Scan(&n).Error; err != nil {
		e.t.Fatal(err)
	}
	return n
}

// billed counts the billing service's records of kind.
func (e *env) billed(kind string) int64 {
	e.t.Helper()
	return e.count("SELECT count(*) FROM billing_records WHERE kind = ?", kind)
}

func decode[T any](t *testing.T, a answer) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(a.body), &v); err != nil {
		t.Fatalf("%d %s: %v", a.status, a.body, err)
	}
	return v
}

func code(t *testing.T, a answer) string {
	t.Helper()
	if a.header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("not a problem: %d %v %s", a.status, a.header, a.body)
	}
	return decode[struct{ Code string }](t, a).Code
}

func replayOf(t *testing.T, first, retry answer) {
	t.Helper()
	if retry.status != first.status || retry.body != first.body || retry.header.Get("Idempotent-Replayed") != "true" ||
		retry.header.Get("Location") != first.header.Get("Location") {
		t.Fatalf("not a replay: %d %v %s\nof %d %s", retry.status, retry.header, retry.body, first.status, first.body)
	}
}

// Concurrent and sequential retries of one invoice call the billing
// service once; every retry gets the first answer byte for byte.
func TestRetriedInvoiceIsIssuedOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		const body = `{"customer":"cus_1","amount":4200,"currency":"EUR"}`
		answers := make([]answer, 6)
		var wg sync.WaitGroup
		for i := range answers {
			wg.Go(func() { answers[i] = e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", body) })
		}
		wg.Wait()
		first := e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", `{"currency":"EUR","amount":4.2e3,"customer":"cus_1"}`)
		for _, a := range answers {
			if a.status == http.StatusConflict && code(t, a) == "request_in_progress" {
				continue
			}
			if a.status != http.StatusCreated || a.body != first.body {
				t.Fatalf("concurrent attempt: %d %s, want %s", a.status, a.body, first.body)
			}
		}
		replayOf(t, first, e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", body))
		inv := decode[Invoice](t, first)
		if !strings.HasPrefix(inv.BillingID, "in_") || inv.Status != statusIssued || first.header.Get("Location") != "/v1/invoices/"+inv.ID {
			t.Fatalf("invoice %+v, Location %q", inv, first.header.Get("Location"))
		}
		if calls, n, rows := e.svc.billing.calls.Load(), e.billed("invoice"), e.count("SELECT count(*) FROM invoices"); calls != 1 || n != 1 || rows != 1 {
			t.Fatalf("billing calls %d, billing records %d, invoices %d; want 1 each", calls, n, rows)
		}
		if a := e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", `{"customer":"cus_1","amount":4201,"currency":"EUR"}`); a.status != http.StatusUnprocessableEntity || code(t, a) != "idempotency_key_reuse" {
			t.Fatalf("key reuse: %d %s", a.status, a.body)
		}
		if got := e.do(http.MethodGet, "/v1/invoices/"+inv.ID, "tok_a", "", ""); got.status != http.StatusOK || decode[Invoice](t, got) != inv {
			t.Fatalf("GET: %d %s", got.status, got.body)
		}
		if got := e.do(http.MethodGet, "/v1/invoices/"+inv.ID, "tok_b", "", ""); got.status != http.StatusNotFound {
			t.Fatalf("another tenant's GET: %d %s", got.status, got.body)
		}
		if e.billed("invoice") != 1 || e.svc.billing.calls.Load() != 1 {
			t.Fatal("a refused request reached the billing service")
		}
	})
}

// The email operation takes its invoice from the path: the path is part
// of the fingerprint, an unknown invoice stores nothing, and a retry
// sends no second email.
func TestEmailTakesTheInvoiceFromThePath(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		inv := decode[Invoice](t, e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", `{"customer":"cus_1","amount":100,"currency":"EUR"}`))
		other := decode[Invoice](t, e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-2", `{"customer":"cus_2","amount":200,"currency":"EUR"}`))
		path := "/v1/invoices/" + inv.ID + "/emails"
		first := e.do(http.MethodPost, path, "tok_a", "email-1", `{"to":"ada@example.com"}`)
		if first.status != http.StatusCreated {
			t.Fatalf("email: %d %s", first.status, first.body)
		}
		replayOf(t, first, e.do(http.MethodPost, path, "tok_a", "email-1", `{"to":"ada@example.com"}`))
		if m := decode[Email](t, first); m.InvoiceID != inv.ID || !strings.HasPrefix(m.BillingID, "em_") || m.To != "ada@example.com" {
			t.Fatalf("email %+v", m)
		}
		// The same key and body for another invoice is another request.
		if a := e.do(http.MethodPost, "/v1/invoices/"+other.ID+"/emails", "tok_a", "email-1", `{"to":"ada@example.com"}`); a.status != http.StatusUnprocessableEntity || code(t, a) != "idempotency_key_reuse" {
			t.Fatalf("same key, other path: %d %s", a.status, a.body)
		}
		// An unknown invoice, or another tenant's, is 404; the key is not
		// bound and the billing service is not called.
		for _, c := range []struct{ token, path string }{{"tok_a", "/v1/invoices/inv_none/emails"}, {"tok_b", path}} {
			if a := e.do(http.MethodPost, c.path, c.token, "email-2", `{"to":"ada@example.com"}`); a.status != http.StatusNotFound || code(t, a) != "not_found" {
				t.Fatalf("%s %s: %d %s", c.token, c.path, a.status, a.body)
			}
		}
		if n := e.count("SELECT count(*) FROM idempotency_records WHERE idem_key = ?", "email-2"); n != 0 {
			t.Fatalf("records of a 404: %d, want none", n)
		}
		if a := e.do(http.MethodPost, "/v1/invoices/"+other.ID+"/emails", "tok_a", "email-2", `{"to":"bob@example.com"}`); a.status != http.StatusCreated {
			t.Fatalf("the key after a 404: %d %s", a.status, a.body)
		}
		if n, rows := e.billed("email"), e.count("SELECT count(*) FROM invoice_emails"); n != 2 || rows != 2 {
			t.Fatalf("billing emails %d, email rows %d; want 2", n, rows)
		}
	})
}

// An answer lost after the billing service acted leaves the record
// unknown (409 outcome_pending); a retry, or the recovery worker,
// reconciles it by looking the downstream key up: no second call.
func TestLostAnswerIsReconciledWithoutASecondCall(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		const body = `{"customer":"cus_lost","amount":4200,"currency":"EUR"}`
		lost := e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", body)
		if lost.status != http.StatusConflict || code(t, lost) != "outcome_pending" || lost.header.Get("Retry-After") == "" {
			t.Fatalf("lost answer: %d %v %s", lost.status, lost.header, lost.body)
		}
		var pending invoiceRow
		if err := e.svc.db.Gorm.Take(&pending).Error; err != nil || pending.Status != statusPending || e.billed("invoice") != 1 {
			t.Fatalf("after the lost answer: %+v %v, billing records %d", pending, err, e.billed("invoice"))
		}
		// An email of the pending invoice is refused, retryably, and not stored.
		if a := e.do(http.MethodPost, "/v1/invoices/"+pending.ID+"/emails", "tok_a", "email-1", `{"to":"lost@example.com"}`); a.status != http.StatusConflict ||
			code(t, a) != "invoice_not_issued" || a.header.Get("Retry-After") == "" {
			t.Fatalf("email of a pending invoice: %d %v %s", a.status, a.header, a.body)
		}
		first := e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", body)
		inv := decode[Invoice](t, first)
		var rec BillingRecord
		if err := e.svc.db.Gorm.Table("billing_records").Select("id").Take(&rec).Error; err != nil ||
			first.status != http.StatusCreated || inv.ID != pending.ID || inv.BillingID != rec.ID {
			t.Fatalf("retry: %d %s, billing record %q (%v)", first.status, first.body, rec.ID, err)
		}
		replayOf(t, first, e.do(http.MethodPost, "/v1/invoices", "tok_a", "invoice-1", body))
		if calls, n := e.svc.billing.calls.Load(), e.billed("invoice"); calls != 1 || n != 1 {
			t.Fatalf("billing calls %d, records %d; want 1 each", calls, n)
		}

		// The email's answer is lost too; the recovery worker settles it
		// without a request, and the retry replays what it stored.
		path := "/v1/invoices/" + inv.ID + "/emails"
		if a := e.do(http.MethodPost, path, "tok_a", "email-1", `{"to":"lost@example.com"}`); a.status != http.StatusConflict || code(t, a) != "outcome_pending" {
			t.Fatalf("lost email answer: %d %s", a.status, a.body)
		}
		stats, err := e.svc.keys.RecoverOnce(context.Background())
		if err != nil || stats.Completed != 1 {
			t.Fatalf("recovery: %+v %v", stats, err)
		}
		sent := e.do(http.MethodPost, path, "tok_a", "email-1", `{"to":"lost@example.com"}`)
		if sent.status != http.StatusCreated || sent.header.Get("Idempotent-Replayed") != "true" || decode[Email](t, sent).Status != statusSent {
			t.Fatalf("after recovery: %d %v %s", sent.status, sent.header, sent.body)
		}
		if calls, n := e.svc.billing.calls.Load(), e.billed("email"); calls != 2 || n != 1 {
			t.Fatalf("billing calls %d (want the invoice's and the email's), email records %d (want 1)", calls, n)
		}
	})
}

// The example's API description passes redocly's recommended rules.
func TestOpenAPIDocumentLints(t *testing.T) {
	t.Parallel()
	e := setup(t, "sqlite:"+filepath.Join(t.TempDir(), "invoices.db"))
	for _, want := range []string{`"invoice_not_issued"`, `"/v1/invoices/{id}/emails"`, `"not_found"`} {
		if !strings.Contains(string(e.svc.spec.JSON()), want) {
			t.Fatalf("the document does not mention %s", want)
		}
	}
	redocly.Lint(t, e.svc.spec.JSON())
}

// TestKeepsItsPromises runs retrysafe's test kit on POST /v1/invoices:
// lost answers, concurrent retries, another body with the key, member
// names spelled otherwise, another tenant. One invoice is one call that
// the billing service recorded.
func TestKeepsItsPromises(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := setup(t, dsn)
		retrysafetest.Run(t, retrysafetest.Config{
			Handler: e.svc.Handler,
			Tenants: [2]retrysafetest.Tenant{retrysafetest.Bearer("acme", "tok_a"), retrysafetest.Bearer("globex", "tok_b")},
			Operation: retrysafetest.Operation{Kind: retrysafetest.PostWithKey, Path: "/v1/invoices",
				Body:      []byte(`{"customer":"cus_1","amount":4200,"currency":"EUR"}`),
				OtherBody: []byte(`{"customer":"cus_1","amount":4201,"currency":"EUR"}`)},
			CountFunc: func(ctx context.Context, tenant string) (n int64, err error) {
				err = e.svc.db.Gorm.WithContext(ctx).Raw("SELECT count(*) FROM billing_records WHERE tenant_id = ? AND kind = ?", tenant, "invoice").
					Scan(&n).Error
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
	dsn := "sqlite:" + filepath.Join(t.TempDir(), "invoices.db")
	go func() {
		done <- run(ctx, []string{"-addr", "127.0.0.1:0", "-db", dsn}, func(string) string { return "" }, pw)
		_ = pw.Close()
	}()
	lines := bufio.NewScanner(pr)
	var url string
	for lines.Scan() {
		if rest, ok := strings.CutPrefix(lines.Text(), "invoices listening on "); ok {
			url = rest
			break
		}
	}
	go func() { _, _ = io.Copy(io.Discard, pr) }()
	if url == "" {
		t.Fatal("no listening line")
	}
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/invoices", strings.NewReader(`{"customer":"cus_1","amount":4200,"currency":"EUR"}`))
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	req.Header.Set("Idempotency-Key", "invoice-1")
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
