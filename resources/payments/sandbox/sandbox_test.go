package sandbox_test

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/payments"
	"github.com/retrysafe/retrysafe/resources/payments/sandbox"
	"github.com/retrysafe/retrysafe/resources/schema"
)

func openDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := schema.Up(context.Background(), db); err != nil {
		t.Fatalf("migrate: %v", err)
	}
	return db
}

func setup(t *testing.T, dsn string) (*sandbox.Provider, *store.DB) {
	t.Helper()
	db := openDB(t, dsn)
	// A lost answer is withheld a second (MaxHang): the callers' contexts
	// have no deadline, which a charge written slowly on a loaded machine
	// could pass before it committed.
	p, err := sandbox.New(db, sandbox.Config{MaxHang: time.Second})
	if err != nil {
		t.Fatalf("new: %v", err)
	}
	return p, db
}

func request(key, method string) payments.ChargeRequest {
	return payments.ChargeRequest{Tenant: "acme", DownstreamKey: key, Amount: 4200, Currency: "usd",
		Customer: "cus_8812", Description: "Order 1042", PaymentMethod: method}
}

func countRows(t *testing.T, db *store.DB, tenant string) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm.Table("sandbox_charges").Where("tenant_id = ?", tenant).Count(&n).Error; err != nil {
		t.Fatalf("count: %v", err)
	}
	return n
}

func TestChargeVisaDeduplicates(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		p, db := setup(t, dsn)
		ctx := context.Background()
		first, err := p.Charge(ctx, request("dk_1", payments.MethodCardVisa))
		if err != nil {
			t.Fatalf("charge: %v", err)
		}
		if !strings.HasPrefix(first.ID, "ch_") || first.Status != payments.ChargeSucceeded || first.Amount != 4200 {
			t.Fatalf("unexpected charge %+v", first)
		}
		again, err := p.Charge(ctx, request("dk_1", payments.MethodCardVisa))
		if err != nil {
			t.Fatalf("charge again: %v", err)
		}
		if again != first {
			t.Fatalf("second charge %+v differs from first %+v", again, first)
		}
		found, err := p.Lookup(ctx, "acme", "dk_1")
		if err != nil || found != first {
			t.Fatalf("lookup = %+v, %v; want %+v", found, err, first)
		}
		if n := countRows(t, db, "acme"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

func TestChargeConcurrentSameKeyChargesOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		p, db := setup(t, dsn)
		const callers = 20
		var (
			wg   sync.WaitGroup
			ids  = make([]string, callers)
			errs = make([]error, callers)
		)
		for i := range callers {
			wg.Go(func() {
				ch, err := p.Charge(context.Background(), request("dk_race", payments.MethodCardVisa))
				ids[i], errs[i] = ch.ID, err
			})
		}
		wg.Wait()
		for i := range callers {
			if errs[i] != nil {
				t.Fatalf("caller %d: %v", i, errs[i])
			}
			if ids[i] != ids[0] {
				t.Fatalf("caller %d got charge %s, caller 0 got %s", i, ids[i], ids[0])
			}
		}
		if n := countRows(t, db, "acme"); n != 1 {
			t.Fatalf("%d charges, want exactly 1", n)
		}
	})
}

func TestChargeDeclinedIsRecorded(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		p, db := setup(t, dsn)
		ctx := context.Background()
		first, err := p.Charge(ctx, request("dk_decl", payments.MethodCardDeclined))
		if err != nil {
			t.Fatalf("charge: %v", err)
		}
		if first.Status != payments.ChargeFailed || first.FailureCode != payments.FailureCardDeclined {
			t.Fatalf("want a decline, got %+v", first)
		}
		again, err := p.Charge(ctx, request("dk_decl", payments.MethodCardDeclined))
		if err != nil || again != first {
			t.Fatalf("repeat = %+v, %v; want the same decline %+v", again, err, first)
		}
		if n := countRows(t, db, "acme"); n != 1 {
			t.Fatalf("%d rows, want 1", n)
		}
		succeeded, err := p.List(ctx, "acme", payments.ChargeSucceeded)
		if err != nil || len(succeeded) != 0 {
			t.Fatalf("succeeded charges = %v, %v; want none", succeeded, err)
		}
	})
}

func TestChargeTimeoutAfterChargeLosesOnlyFirstAnswer(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		p, db := setup(t, dsn)
		_, err := p.Charge(context.Background(), request("dk_to", payments.MethodCardTimeoutAfterCharge))
		if !errors.Is(err, payments.ErrProviderTimeout) {
			t.Fatalf("first call: err = %v, want ErrProviderTimeout", err)
		}
		found, err := p.Lookup(context.Background(), "acme", "dk_to")
		if err != nil || found.Status != payments.ChargeSucceeded {
			t.Fatalf("lookup after the lost answer = %+v, %v; want the committed charge", found, err)
		}
		// A new provider on a new pool (a restart, another process) answers.
		p2, err := sandbox.New(openDB(t, dsn), sandbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		again, err := p2.Charge(context.Background(), request("dk_to", payments.MethodCardTimeoutAfterCharge))
		if err != nil || again != found {
			t.Fatalf("retry = %+v, %v; want %+v", again, err, found)
		}
		if n := countRows(t, db, "acme"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

func TestChargeTimeoutAfterChargeConcurrentLosesOneAnswer(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		p, db := setup(t, dsn)
		const callers = 20
		var (
			wg       sync.WaitGroup
			mu       sync.Mutex
			timeouts int
			ids      = map[string]bool{}
		)
		for range callers {
			wg.Go(func() {
				ch, err := p.Charge(context.Background(), request("dk_to_race", payments.MethodCardTimeoutAfterCharge))
				mu.Lock()
				defer mu.Unlock()
				switch {
				case errors.Is(err, payments.ErrProviderTimeout):
					timeouts++
				case err != nil:
					t.Errorf("charge: %v", err)
				default:
					ids[ch.ID] = true
				}
			})
		}
		wg.Wait()
		if timeouts != 1 || len(ids) != 1 {
			t.Fatalf("%d lost answers and %d distinct charges; want 1 and 1", timeouts, len(ids))
		}
		if n := countRows(t, db, "acme"); n != 1 {
			t.Fatalf("%d charges, want 1", n)
		}
	})
}

func TestChargeRejects(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		p, db := setup(t, dsn)
		ctx := context.Background()
		if _, err := p.Charge(ctx, request("dk_x", "pm_card_unknown")); !errors.Is(err, payments.ErrUnknownPaymentMethod) {
			t.Fatalf("unknown method: err = %v", err)
		}
		if n := countRows(t, db, "acme"); n != 0 {
			t.Fatalf("%d charges after an unknown method, want 0", n)
		}
		if _, err := p.Charge(ctx, request("dk_x", payments.MethodCardVisa)); err != nil {
			t.Fatal(err)
		}
		other := request("dk_x", payments.MethodCardVisa)
		other.Amount = 1
		if _, err := p.Charge(ctx, other); !errors.Is(err, payments.ErrDownstreamKeyReuse) {
			t.Fatalf("other amount, same key: err = %v, want ErrDownstreamKeyReuse", err)
		}
		if _, err := p.Lookup(ctx, "acme", "dk_none"); !errors.Is(err, payments.ErrChargeNotFound) {
			t.Fatalf("lookup of an unknown key: err = %v", err)
		}
	})
}

func TestChargesAreTenantScoped(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		p, _ := setup(t, dsn)
		ctx := context.Background()
		a, err := p.Charge(ctx, request("dk_same", payments.MethodCardVisa))
		if err != nil {
			t.Fatal(err)
		}
		req := request("dk_same", payments.MethodCardVisa)
		req.Tenant = "globex"
		b, err := p.Charge(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if a.ID == b.ID {
			t.Fatalf("two tenants share charge %s", a.ID)
		}
		if _, err := p.Lookup(ctx, "initech", "dk_same"); !errors.Is(err, payments.ErrChargeNotFound) {
			t.Fatalf("a third tenant sees a charge: %v", err)
		}

		gin.SetMode(gin.TestMode)
		auth, err := server.NewStaticTokens(map[string]string{"tok_a": "acme", "tok_g": "globex"})
		if err != nil {
			t.Fatal(err)
		}
		router := gin.New()
		p.Mount(router.Group("/v1", server.RequireAuth(auth, nil)))
		list := func(token, query string) []sandbox.ChargeView {
			t.Helper()
			rec := httptest.NewRecorder()
			r := httptest.NewRequest(http.MethodGet, "/v1/sandbox/charges"+query, nil)
			r.Header.Set("Authorization", "Bearer "+token)
			router.ServeHTTP(rec, r)
			if rec.Code != http.StatusOK {
				t.Fatalf("GET /v1/sandbox/charges: %d %s", rec.Code, rec.Body)
			}
			var views []sandbox.ChargeView
			if err := json.Unmarshal(rec.Body.Bytes(), &views); err != nil {
				t.Fatal(err)
			}
			return views
		}
		if got := list("tok_a", ""); len(got) != 1 || got[0].ID != a.ID || got[0].DownstreamKey != "dk_same" || got[0].Amount != 4200 {
			t.Fatalf("acme sees %+v, want only %s", got, a.ID)
		}
		if got := list("tok_g", "?status=succeeded"); len(got) != 1 || got[0].ID != b.ID {
			t.Fatalf("globex sees %+v, want only %s", got, b.ID)
		}
	})
}
