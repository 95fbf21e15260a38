package tests

import (
	"bytes"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func wantLegacyHeaders(t *testing.T, r response) {
	t.Helper()
	if !strings.HasPrefix(r.Header.Get("Deprecation"), "@") {
		t.Fatalf("Deprecation = %q, want an RFC 9745 date", r.Header.Get("Deprecation"))
	}
	if link := r.Header.Get("Link"); !strings.Contains(link, `rel="successor-version"`) || !strings.HasPrefix(link, "</v1/orders") {
		t.Fatalf("Link = %q, want a successor-version link to the PUT form", link)
	}
}

func TestLegacyPOSTCreatesThroughTheEngine(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		key := "order-1042-attempt"
		id := collection.LegacyID("orders", key)
		location := orderPath(id)

		created := e.do("POST", "/v1/orders", tokenAcme, orderBody(2, "10.00"), "Idempotency-Key", key)
		wantStatus(t, created, http.StatusCreated)
		wantLegacyHeaders(t, created)
		if created.Header.Get("Location") != location || created.Header.Get("Idempotency-Key") != key {
			t.Fatalf("headers: %v", created.Header)
		}
		if link := created.Header.Get("Link"); link != "<"+location+`>; rel="successor-version"` {
			t.Fatalf("Link = %q", link)
		}
		if id.Version() != 5 {
			t.Fatalf("derived ID %s is not a name-based UUID", id)
		}

		replay := e.do("POST", "/v1/orders", tokenAcme, []byte(`{"items":[{"unit_price":"10.0","quantity":2,"sku":"sku_1"}],"note":"n","currency":"EUR","customer":"cus_1"}`), "Idempotency-Key", key)
		wantStatus(t, replay, http.StatusCreated)
		wantLegacyHeaders(t, replay)
		if replay.Header.Get("Idempotent-Replayed") != "true" || replay.Header.Get("Location") != location || !bytes.Equal(replay.Body, created.Body) {
			t.Fatalf("replay: %v %s", replay.Header, replay.Body)
		}

		reuse := e.do("POST", "/v1/orders", tokenAcme, orderBody(3, "10.00"), "Idempotency-Key", key)
		wantStatus(t, reuse, http.StatusUnprocessableEntity)
		wantLegacyHeaders(t, reuse)
		if reuse.Code(t) != "idempotency_key_reuse" {
			t.Fatalf("reuse: %s", reuse.Body)
		}

		got := e.do("GET", location, tokenAcme, nil)
		wantStatus(t, got, http.StatusOK)
		if !bytes.Equal(got.Body, created.Body) {
			t.Fatalf("GET of the Location: %s, want %s", got.Body, created.Body)
		}
		// A client that moved to PUT converges on the same resource.
		put := e.do("PUT", location, tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, put, http.StatusCreated)
		if put.Header.Get("Idempotent-Replayed") != "true" || !bytes.Equal(put.Body, created.Body) {
			t.Fatalf("PUT to the derived ID: %v %s", put.Header, put.Body)
		}

		// The same key in another tenant is another resource.
		other := e.do("POST", "/v1/orders", tokenGlobex, orderBody(5, "1.00"), "X-Idempotency-Key", key)
		wantStatus(t, other, http.StatusCreated)
		if other.Header.Get("Idempotent-Replayed") != "" || bytes.Equal(other.Body, created.Body) {
			t.Fatalf("globex got acme's order: %s", other.Body)
		}
		if n := e.count("orders", "id = ?", id.String()); n != 2 {
			t.Fatalf("rows with the derived ID = %d, want one per tenant", n)
		}
		if a, g := e.events("acme", id), e.events("globex", id); a != 1 || g != 1 {
			t.Fatalf("order.created events acme=%d globex=%d, want 1 and 1", a, g)
		}
		if row := e.order("acme", id); row.Version != 1 {
			t.Fatalf("legacy retries wrote: version %d", row.Version)
		}
		e.wantOneItem("acme", id, 2, 1000)
		if c := e.orderColumns("globex", id); c.TotalCents != 500 || len(c.Items) != 1 || c.Items[0].Quantity != 5 {
			t.Fatalf("globex's order columns: %+v", c)
		}

		metrics := e.do("GET", "/metrics", "", nil)
		for _, want := range []string{
			`retrysafe_legacy_post_requests_total{resource="orders",tenant="acme"} 3`,
			`retrysafe_legacy_post_requests_total{resource="orders",tenant="globex"} 1`,
		} {
			if !strings.Contains(string(metrics.Body), want) {
				t.Fatalf("/metrics lacks %s", want)
			}
		}
	})
}

func TestLegacyPOSTKeyErrorsStoreNothing(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		cases := []struct {
			headers []string
			code    string
		}{
			{nil, "idempotency_key_missing"},
			{[]string{"Idempotency-Key", ""}, "idempotency_key_invalid"},
			{[]string{"Idempotency-Key", strings.Repeat("k", 256)}, "idempotency_key_invalid"},
			{[]string{"Idempotency-Key", "has space"}, "idempotency_key_invalid"},
			{[]string{"Idempotency-Key", "clé"}, "idempotency_key_invalid"},
			{[]string{"Idempotency-Key", "a", "X-Idempotency-Key", "b"}, "idempotency_key_invalid"},
		}
		for _, c := range cases {
			r := e.do("POST", "/v1/orders", tokenAcme, orderBody(1, "1.00"), c.headers...)
			wantStatus(t, r, http.StatusBadRequest)
			wantLegacyHeaders(t, r)
			if got := r.Code(t); got != c.code {
				t.Fatalf("headers %q: code %q, want %q", c.headers, got, c.code)
			}
		}
		// A bad body with a good key stores nothing; the key stays usable.
		key := uuid.NewString()
		wantStatus(t, e.do("POST", "/v1/orders", tokenAcme, orderBody(0, "1.00"), "Idempotency-Key", key), http.StatusBadRequest)
		if n := e.count("orders", ""); n != 0 {
			t.Fatalf("rejected requests stored %d orders", n)
		}
		wantStatus(t, e.do("POST", "/v1/orders", tokenAcme, orderBody(1, "1.00"), "Idempotency-Key", key), http.StatusCreated)
		wantStatus(t, e.do("POST", "/v1/orders", "", orderBody(1, "1.00"), "Idempotency-Key", key), http.StatusUnauthorized)
	})
}
