package collection_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

type listPage struct {
	Items      []invoiceView `json:"items"`
	NextCursor *string       `json:"next_cursor"`
}

// pageAll follows next_cursor from the first page of query and returns the
// items in order.
func (h *harness) pageAll(query url.Values, limit int) []invoiceView {
	h.t.Helper()
	query.Set("limit", itoa(limit))
	var out []invoiceView
	for pages := 0; ; pages++ {
		if pages > 200 {
			h.t.Fatal("pagination does not end")
		}
		r := h.do("GET", "/v1/invoices?"+query.Encode(), "tok1", nil)
		wantStatus(h.t, r, http.StatusOK)
		var p listPage
		if err := json.Unmarshal(r.Body, &p); err != nil {
			h.t.Fatal(err)
		}
		out = append(out, p.Items...)
		if p.NextCursor == nil {
			return out
		}
		query.Set("cursor", *p.NextCursor)
	}
}

// TestListNewestFirstUnderConcurrentInserts pages through a tenant's
// invoices while other requests keep creating new ones: every invoice that
// existed before the first page appears exactly once, no item appears
// twice, and the order is newest first. Filters on status and customer
// select exactly the matching rows, and other filters are refused.
func TestListNewestFirstUnderConcurrentInserts(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		ctx := context.Background()
		before := map[string]bool{}
		sent := map[string]bool{}
		for i := range 30 {
			id := uuid.New()
			customer := "cus_a"
			if i%3 == 0 {
				customer = "cus_b"
			}
			wantStatus(t, h.do("PUT", invoicePath(id), "tok1", invoiceBody(customer, i)), http.StatusCreated)
			before[id.String()] = true
			if i%5 == 0 {
				if _, err := h.col.SetStatus(ctx, "t1", id, "sent"); err != nil {
					t.Fatal(err)
				}
				sent[id.String()] = true
			}
		}
		wantStatus(t, h.do("PUT", invoicePath(uuid.New()), "tok2", invoiceBody("cus_a", 1)), http.StatusCreated)

		stop := make(chan struct{})
		var inserted atomic.Int64
		var wg sync.WaitGroup
		for range 2 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if r := h.do("PUT", invoicePath(uuid.New()), "tok1", invoiceBody("cus_a", 1)); r.Status != http.StatusCreated {
						t.Errorf("concurrent insert: %d %s", r.Status, r.Body)
						return
					}
					inserted.Add(1)
				}
			})
		}
		items := h.pageAll(url.Values{}, 4)
		close(stop)
		wg.Wait()
		if inserted.Load() == 0 {
			t.Log("no insert happened while paging")
		}
		seen := map[string]bool{}
		for i, it := range items {
			if seen[it.ID] {
				t.Fatalf("item %s repeated", it.ID)
			}
			seen[it.ID] = true
			if i > 0 {
				prev := items[i-1]
				if prev.Created.Before(it.Created) || prev.Created.Equal(it.Created) && prev.ID < it.ID {
					t.Fatalf("not newest first at %d: %v %s then %v %s", i, prev.Created, prev.ID, it.Created, it.ID)
				}
			}
		}
		for id := range before {
			if !seen[id] {
				t.Fatalf("item %s that existed before paging was skipped", id)
			}
		}

		// Filters, each on an indexed typed column.
		for _, tc := range []struct {
			query url.Values
			match func(invoiceView) bool
		}{
			{url.Values{"status": {"sent"}}, func(v invoiceView) bool { return sent[v.ID] }},
			{url.Values{"customer": {"cus_b"}}, func(v invoiceView) bool { return v.Customer == "cus_b" }},
			{url.Values{"customer": {"cus_b"}, "status": {"draft"}}, func(v invoiceView) bool { return v.Customer == "cus_b" && !sent[v.ID] }},
		} {
			got := h.pageAll(tc.query, 3)
			want := 0
			for _, it := range items {
				if before[it.ID] && tc.match(it) {
					want++
				}
			}
			if len(got) != want {
				t.Fatalf("filter %v: %d items, want %d", tc.query, len(got), want)
			}
			for _, it := range got {
				if !tc.match(it) {
					t.Fatalf("filter %v listed %+v", tc.query, it)
				}
			}
		}
		bad := h.do("GET", "/v1/invoices?limit=101", "tok1", nil)
		wantStatus(t, bad, http.StatusBadRequest)
		wantStatus(t, h.do("GET", "/v1/invoices?cursor=bm90LWEtY3Vyc29y", "tok1", nil), http.StatusBadRequest)
		// A parameter that is not a declared filter is ignored, never a
		// query on an undeclared column.
		all := h.pageAll(url.Values{"total_amount": {"1"}}, 100)
		if len(all) < len(before) {
			t.Fatalf("an undeclared filter narrowed the list to %d", len(all))
		}
	})
}

// TestListRefusesUnstorableFilterValues: a filter value the database cannot
// store (NUL, invalid UTF-8) is 400 validation_failed on that filter, with
// or without the StorableText middleware in front (this router has none),
// never a 500 from PostgreSQL's 22021.
func TestListRefusesUnstorableFilterValues(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		for _, v := range []string{"cus_%00a", "%FF", "%C3%28"} {
			r := h.do("GET", "/v1/invoices?customer="+v, "tok1", nil)
			wantStatus(t, r, http.StatusBadRequest)
			var p struct {
				Code   string `json:"code"`
				Errors []struct {
					Field string `json:"field"`
				} `json:"errors"`
			}
			if err := json.Unmarshal(r.Body, &p); err != nil || p.Code != "validation_failed" || len(p.Errors) != 1 || p.Errors[0].Field != "customer" {
				t.Fatalf("customer=%s → %s", v, r.Body)
			}
		}
	})
}
