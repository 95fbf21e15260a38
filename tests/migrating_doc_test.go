package tests

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/orders"
	"github.com/retrysafe/retrysafe/resources/schema"
)

// TestMigratingDocOnAPlainRouter follows docs/migrating-post-to-put.md on
// a plain gin router, with only what the framework exports.
func TestMigratingDocOnAPlainRouter(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		if err := schema.Up(ctx, db); err != nil {
			t.Fatal(err)
		}
		tokens := map[string]string{tokenAcme: "acme", tokenGlobex: "globex"}

		// Step 1, as written in the document.
		build := func(legacy bool) http.Handler {
			registry := prometheus.NewRegistry()
			metrics, err := telemetry.NewMetrics(registry)
			if err != nil {
				t.Fatal(err)
			}
			engine, err := framework.NewEngine(db, framework.EngineConfig{Metrics: metrics})
			if err != nil {
				t.Fatal(err)
			}
			col, err := collection.New(engine, orders.Resource())
			if err != nil {
				t.Fatal(err)
			}
			auth, err := server.NewStaticTokens(tokens)
			if err != nil {
				t.Fatal(err)
			}
			router := gin.New()
			server.UseProblemHandlers(router, nil)
			router.GET("/metrics", gin.WrapH(promhttp.HandlerFor(registry, promhttp.HandlerOpts{})))
			v1 := router.Group("/v1", server.RequireAuth(auth, nil))
			col.Mount(v1)
			if legacy {
				if err := col.MountLegacyPOST(v1, collection.LegacyConfig{
					DeprecatedSince: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC),
				}); err != nil {
					t.Fatal(err)
				}
			}
			return router
		}
		srv := httptest.NewServer(build(true))
		t.Cleanup(srv.Close)
		e := &env{t: t, srv: srv}

		key := "K-1"
		location := orderPath(collection.LegacyID("orders", key))
		created := e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(2, "10.00"), "Idempotency-Key", key)
		wantStatus(t, created, http.StatusCreated)
		if created.Header.Get("Location") != location || created.Header.Get("Idempotency-Key") != key ||
			created.Header.Get("Link") != "<"+location+`>; rel="successor-version"` || created.Header.Get("Deprecation") != "@1767225600" {
			t.Fatalf("create: %v", created.Header)
		}
		replay := e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(2, "10.0"), "Idempotency-Key", key)
		wantReplay(t, replay, created)
		reuse := e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(3, "10.00"), "Idempotency-Key", key)
		if wantStatus(t, reuse, http.StatusUnprocessableEntity); reuse.Code(t) != "idempotency_key_reuse" {
			t.Fatalf("reuse: %s", reuse.Body)
		}
		if r := e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(2, "10.00")); r.Code(t) != "idempotency_key_missing" ||
			!strings.HasPrefix(r.Header.Get("Link"), "</v1/orders/") {
			t.Fatalf("no key: %v %s", r.Header, r.Body)
		}
		// Step 2: a PUT of the same body to the Location converges.
		if put := e.do(http.MethodPut, location, tokenAcme, orderBody(2, "10.00")); put.Status != http.StatusCreated ||
			put.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("PUT to the legacy Location: %d %v", put.Status, put.Header)
		}
		// Step 3: the legacy counter on /metrics.
		res, err := srv.Client().Get(srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(res.Body)
		_ = res.Body.Close()
		if !strings.Contains(string(body), `retrysafe_legacy_post_requests_total{resource="orders",tenant="acme"} 4`) {
			t.Fatalf("metrics:\n%s", body)
		}
		// Step 4: without MountLegacyPOST the route answers 405 with a problem.
		off := httptest.NewServer(build(false))
		t.Cleanup(off.Close)
		gone := (&env{t: t, srv: off}).do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(2, "10.00"), "Idempotency-Key", key)
		if wantStatus(t, gone, http.StatusMethodNotAllowed); gone.Code(t) != "method_not_allowed" {
			t.Fatalf("turned off: %s", gone.Body)
		}
		if got := (&env{t: t, srv: off}).do(http.MethodGet, location, tokenAcme, nil); got.Status != http.StatusOK {
			t.Fatalf("GET after turning POST off: %d", got.Status)
		}
	})
}
