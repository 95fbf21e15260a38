package tests

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

// raw sends a request with exactly the given Content-Type ("" for none).
func (e *env) raw(method, path, contentType string, body []byte, headers ...string) response {
	e.t.Helper()
	req, err := http.NewRequest(method, e.srv.URL+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenAcme)
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := e.srv.Client().Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// A body that is not JSON is 415 on both patterns, and nothing is stored;
// JSON media types with parameters, +json types and no type are read.
func TestNonJSONBodiesAreRefused(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		for i, ct := range []string{"text/plain", "application/x-www-form-urlencoded", "application/xml"} {
			key := string(rune('a' + i))
			put := e.raw(http.MethodPut, orderPath(uuid.New()), ct, orderBody(1, "1.00"))
			post := e.raw(http.MethodPost, "/v1/transfers", ct, transferBody("acc_a", "acc_b", 5, "EUR"), "Idempotency-Key", "t-"+key)
			legacy := e.raw(http.MethodPost, "/v1/orders", ct, orderBody(1, "1.00"), "Idempotency-Key", "l-"+key)
			for _, r := range []response{put, post, legacy} {
				wantStatus(t, r, http.StatusUnsupportedMediaType)
				if r.Code(t) != "unsupported_media_type" || r.Header.Get("Retry-After") != "" {
					t.Fatalf("%s: %s", ct, r.Body)
				}
			}
		}
		for _, table := range []string{"orders", "idempotency_records", "transfers", "accounts"} {
			if n := e.count(table, ""); n != 0 {
				t.Fatalf("%s has %d rows after refused requests", table, n)
			}
		}
		for i, ct := range []string{"", "application/json; charset=utf-8", "application/merge-patch+json"} {
			r := e.raw(http.MethodPost, "/v1/transfers", ct, transferBody("acc_a", "acc_b", 5, "EUR"), "Idempotency-Key", "ok-"+string(rune('a'+i)))
			wantStatus(t, r, http.StatusCreated)
		}
	})
}

// Problem details a client reads: the singular noun, a 401 that names its
// scheme, a legacy POST whose Link points at a PUT URL even on an early
// error, and final business answers without Retry-After.
func TestProblemDetailsOnTheWire(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		missing := e.do(http.MethodGet, orderPath(uuid.New()), tokenAcme, nil)
		wantStatus(t, missing, http.StatusNotFound)
		if detail, _ := missing.JSON(t)["detail"].(string); detail != "no such order" {
			t.Fatalf("detail = %q, want %q", detail, "no such order")
		}
		unauth := e.do(http.MethodGet, orderPath(uuid.New()), "", nil)
		wantStatus(t, unauth, http.StatusUnauthorized)
		if unauth.Header.Get("WWW-Authenticate") != "Bearer" || unauth.Code(t) != "unauthenticated" {
			t.Fatalf("401: %v %s", unauth.Header, unauth.Body)
		}
		successor := regexp.MustCompile(`^</v1/orders/([0-9a-f-]{36})>; rel="successor-version"$`)
		for _, key := range []string{"", "bad key"} {
			var r response
			if key == "" {
				r = e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(1, "1.00"))
			} else {
				r = e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(1, "1.00"), "Idempotency-Key", key)
			}
			wantStatus(t, r, http.StatusBadRequest)
			m := successor.FindStringSubmatch(r.Header.Get("Link"))
			if m == nil || uuid.MustParse(m[1]) == uuid.Nil || r.Header.Get("Deprecation") == "" {
				t.Fatalf("early error Link = %q", r.Header.Get("Link"))
			}
		}
		e.transfer(tokenAcme, "t1", transferBody("acc_a", "acc_b", 5, "EUR"))
		mismatch := e.transfer(tokenAcme, "t2", transferBody("acc_a", "acc_b", 5, "USD"))
		wantStatus(t, mismatch, http.StatusConflict)
		if mismatch.Code(t) != "currency_mismatch" || mismatch.Header.Get("Retry-After") != "" {
			t.Fatalf("currency_mismatch: %v %s", mismatch.Header, mismatch.Body)
		}
	})
}

// TestDocCodesMatchTheRegistry keeps the table of problem codes in
// docs/clients.md equal to the demo's registry: the generic codes of wire/
// plus the business codes its resources register.
func TestDocCodesMatchTheRegistry(t *testing.T) {
	t.Parallel()
	e := newEnv(t, testdb.New(t, "sqlite"))
	doc, err := os.ReadFile("../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(doc), "<!-- problem-codes -->")
	table, _, ok2 := strings.Cut(table, "<!-- /problem-codes -->")
	if !ok || !ok2 {
		t.Fatal("docs/clients.md has no problem-codes table")
	}
	row := regexp.MustCompile("^\\| (\\d{3}) \\| `([a-z0-9_]+)`[^|]* \\| (yes|no)")
	documented := map[wire.Code]wire.CodeInfo{}
	for line := range strings.SplitSeq(table, "\n") {
		if m := row.FindStringSubmatch(line); m != nil {
			var status int
			for _, c := range m[1] {
				status = status*10 + int(c-'0')
			}
			documented[wire.Code(m[2])] = wire.CodeInfo{Code: wire.Code(m[2]), Status: status, Retryable: m[3] == "yes"}
		}
	}
	registered := e.app.Engine.Codes().All()
	for _, info := range registered {
		// Retry-After on exactly the retryable answers of the demo.
		status, h, _ := e.app.Engine.RenderProblem(&framework.Error{Code: info.Code, RetryAfter: 2 * time.Second})
		if status != info.Status || (h.Get("Retry-After") != "") != info.Retryable {
			t.Errorf("%q renders %d with Retry-After %q", info.Code, status, h.Get("Retry-After"))
		}
		doc, ok := documented[info.Code]
		if !ok || doc.Status != info.Status || doc.Retryable != info.Retryable {
			t.Errorf("docs/clients.md documents %q as %+v; the registry says %d, retryable %v", info.Code, doc, info.Status, info.Retryable)
		}
	}
	if len(documented) != len(registered) {
		t.Errorf("docs/clients.md lists %d codes, the registry holds %d", len(documented), len(registered))
	}
}
