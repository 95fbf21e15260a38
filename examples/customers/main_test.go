package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func do(t *testing.T, srv *httptest.Server, method, path, token, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, bytes.NewBufferString(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	res, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res.StatusCode, res.Header, b
}

// TestKeepsItsPromises runs retrysafe's test kit on PUT and PATCH
// /v1/customers/{id}: lost answers, concurrent retries, member names
// spelled otherwise, another tenant, a conditional write whose answer was
// lost. Every create, replace and patch moves a customer's version by
// one, so the sum of the versions counts them; {id} gives each case an
// email of its own, which must be unique.
func TestKeepsItsPromises(t *testing.T) {
	gin.SetMode(gin.TestMode)
	testdb.Run(t, func(t *testing.T, dsn string) {
		db, err := store.Open(t.Context(), dsn, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		h, err := newHandler(t.Context(), db, map[string]string{"tok_a": "a", "tok_b": "b"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		kit := retrysafetest.Config{
			Handler: h,
			Tenants: [2]retrysafetest.Tenant{retrysafetest.Bearer("a", "tok_a"), retrysafetest.Bearer("b", "tok_b")},
			CountFunc: func(ctx context.Context, tenant string) (n int64, err error) {
				err = db.Gorm.WithContext(ctx).Model(&Customer{}).Where("tenant_id = ?", tenant).Select("COALESCE(SUM(version), 0)").Scan(&n).Error
				return n, err
			},
		}
		const ada = `{"name":"Ada","email":"ada+{id}@example.com"}`
		t.Run("PUT", func(t *testing.T) {
			kit.Operation = retrysafetest.Operation{Kind: retrysafetest.PutCreateOrReplace, Path: "/v1/customers/{id}",
				Body: []byte(ada), OtherBody: []byte(`{"name":"Ada Lovelace","email":"ada+{id}@example.com","plan":"pro"}`)}
			retrysafetest.Run(t, kit)
		})
		t.Run("PATCH", func(t *testing.T) {
			kit.Operation = retrysafetest.Operation{Kind: retrysafetest.Patch, Path: "/v1/customers/{id}",
				Create: []byte(ada), Body: []byte(`{"plan":"pro"}`)}
			retrysafetest.Run(t, kit)
		})
	})
}

// TestCustomers runs the example over real HTTP on SQLite, and on
// PostgreSQL when TEST_DATABASE_URL is set.
func TestCustomers(t *testing.T) {
	gin.SetMode(gin.TestMode)
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		h, err := newHandler(ctx, db, map[string]string{"tok_a": "a", "tok_b": "b"}, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		srv := httptest.NewServer(h)
		defer srv.Close()
		count := func(where string, args ...any) int64 {
			var n int64
			if err := db.Gorm.Table("customers").Where(where, args...).Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			return n
		}

		id := uuid.New()
		path := "/v1/customers/" + id.String()
		status, hdr, created := do(t, srv, "PUT", path, "tok_a", `{"name":"Ada","email":"Ada@Example.com"}`)
		if status != http.StatusCreated || hdr.Get("Location") != path {
			t.Fatalf("create: %d %v %s", status, hdr, created)
		}
		var c struct {
			ID, Status, Name, Email, Plan string
			Version                       int64
		}
		if err := json.Unmarshal(created, &c); err != nil || c.ID != id.String() || c.Email != "ada@example.com" || c.Plan != "free" || c.Version != 1 || c.Status != "active" {
			t.Fatalf("representation %s (%v)", created, err)
		}
		// The retry, spelled differently, replays and writes nothing.
		status, hdr, again := do(t, srv, "PUT", path, "tok_a", `{"email":"ada@example.com","name":"Ada","plan":"free"}`)
		if status != http.StatusCreated || hdr.Get("Idempotent-Replayed") != "true" || !bytes.Equal(again, created) {
			t.Fatalf("retry: %d %v %s", status, hdr, again)
		}
		var row Customer
		if err := db.Gorm.Where("tenant_id = ? AND id = ?", "a", id).Take(&row).Error; err != nil || row.Email != "ada@example.com" || row.Version != 1 {
			t.Fatalf("row %+v (%v)", row, err)
		}
		// The email is unique per tenant: another ID with it is refused and
		// stores nothing; the other tenant may use it.
		status, _, body := do(t, srv, "PUT", "/v1/customers/"+uuid.NewString(), "tok_a", `{"name":"Eve","email":"ada@example.com"}`)
		if status != http.StatusBadRequest || !bytes.Contains(body, []byte(`"unique"`)) {
			t.Fatalf("duplicate email: %d %s", status, body)
		}
		if status, _, body := do(t, srv, "PUT", "/v1/customers/"+uuid.NewString(), "tok_b", `{"name":"Ada B","email":"ada@example.com"}`); status != http.StatusCreated {
			t.Fatalf("the email in another tenant: %d %s", status, body)
		}
		if n := count("email = ?", "ada@example.com"); n != 2 {
			t.Fatalf("rows with the email = %d, want one per tenant", n)
		}
		// A replace, then the list filtered by email.
		status, _, replaced := do(t, srv, "PUT", path, "tok_a", `{"name":"Ada Lovelace","email":"ada@example.com","plan":"pro"}`)
		if status != http.StatusOK || !bytes.Contains(replaced, []byte(`"version":2`)) {
			t.Fatalf("replace: %d %s", status, replaced)
		}
		bob := "/v1/customers/" + uuid.NewString()
		do(t, srv, "PUT", bob, "tok_a", `{"name":"Bob","email":"bob@example.com"}`)
		status, _, list := do(t, srv, "GET", "/v1/customers?email=ada@example.com", "tok_a", "")
		var page struct {
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(list, &page); err != nil || status != http.StatusOK || len(page.Items) != 1 || !bytes.Equal(page.Items[0], replaced) {
			t.Fatalf("filtered list: %d %s", status, list)
		}
		// The PATCH the framework derives from the PUT: a merge patch of
		// the customer's PUT body (no Content-Type is a merge patch), its
		// result validated, normalized and written as a replace.
		status, _, patched := do(t, srv, "PATCH", bob, "tok_a", `{"plan":"pro"}`)
		if status != http.StatusOK || !bytes.Contains(patched, []byte(`"plan":"pro"`)) || !bytes.Contains(patched, []byte(`"version":2`)) {
			t.Fatalf("patch: %d %s", status, patched)
		}
		// A patch that takes another customer's email gets the answer a PUT
		// of its result gets, and stores nothing.
		putStatus, _, putBody := do(t, srv, "PUT", bob, "tok_a", `{"name":"Bob","email":"ada@example.com","plan":"pro"}`)
		patchStatus, _, patchBody := do(t, srv, "PATCH", bob, "tok_a", `{"email":"Ada@Example.com"}`)
		if putStatus != http.StatusBadRequest || patchStatus != putStatus || !bytes.Equal(patchBody, putBody) {
			t.Fatalf("the email collision: PUT %d %s, PATCH %d %s", putStatus, putBody, patchStatus, patchBody)
		}
		if n := count("email = ?", "bob@example.com"); n != 1 {
			t.Fatalf("the refused patch changed Bob's email: %d rows keep it", n)
		}
		if status, _, body := do(t, srv, "GET", bob, "tok_a", ""); status != http.StatusOK || !bytes.Equal(body, patched) {
			t.Fatalf("Bob after the refused patch: %d %s, want %s", status, body, patched)
		}
		if status, _, _ := do(t, srv, "DELETE", path, "tok_a", ""); status != http.StatusNoContent {
			t.Fatalf("delete: %d", status)
		}
		if status, _, _ := do(t, srv, "PUT", path, "tok_a", `{"name":"Ada","email":"ada@example.com"}`); status != http.StatusGone {
			t.Fatalf("PUT after delete: %d", status)
		}

		// The goose migration made the keys and indexes the engine needs.
		storetest.CheckTable(t, db, storetest.TableCheck{Table: "customers",
			NewRow: func(n int) any {
				return &Customer{Name: "x", Email: "check" + string(rune('0'+n)) + "@example.com", Plan: "free"}
			},
			Indexes: [][]string{{"tenant_id", "status", "created_at", "id"}, {"tenant_id", "email"}}})
	})
}
