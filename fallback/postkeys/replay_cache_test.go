package postkeys_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-playground/validator/v10"
	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestReplayCacheReplaysOnlyACompletedRecordOfTheRequest: with a key's
// bytes kept, the retries of that key are answered byte for byte from its
// record without a bind, concurrently too, and anything else takes the
// usual path: a new key with the same bytes executes once, a key reused
// with other bytes is 422, another tenant is its own, a request without a
// key is never answered from the cache, and a record taken over by the
// janitor's expiry executes again once. Phased (widgets, with its
// provider call) and local (counters) alike. The binds are counted by a
// validation of the commands registered on the engine's binder.
func TestReplayCacheReplaysOnlyACompletedRecordOfTheRequest(t *testing.T) {
	t.Parallel()
	for _, size := range []int{0, -1} {
		on := size == 0
		t.Run(map[bool]string{true: "cache", false: "nocache"}[on], func(t *testing.T) {
			t.Parallel()
			testdb.Run(t, func(t *testing.T, dsn string) {
				h := setup(t, dsn, func(c *postkeys.Config, _ *widgets) { c.ReplayCache = size })
				var binds atomic.Int64
				count := func(validator.StructLevel) { binds.Add(1) }
				h.engine.Binder().Validator().RegisterStructValidation(count, widgetCmd{}, counterCmd{})
				// wantBinds checks the binds since the last step: with the
				// cache on, and off.
				wantBinds := func(step string, withCache, without int64) {
					t.Helper()
					want := without
					if on {
						want = withCache
					}
					if n := binds.Swap(0); n != want {
						t.Fatalf("cache on=%v, %s: %d binds, want %d", on, step, n, want)
					}
				}

				// Phased: the provider is called once per key, whatever the
				// retries.
				body := `{"name":"w1"}`
				first := h.post("/v1/widgets", tokenA, "k1", body)
				wantStatus(t, first, http.StatusCreated)
				wantBinds("the create", 1, 1)
				wantReplay(t, h.post("/v1/widgets", tokenA, "k1", body), first)
				// Bound, then bound again for the cache.
				wantBinds("the first replay", 2, 1)
				var wg sync.WaitGroup
				for range 4 {
					wg.Go(func() {
						for range 5 {
							if r := h.post("/v1/widgets", tokenA, "k1", body); r.Status != first.Status || string(r.Body) != string(first.Body) {
								t.Errorf("concurrent replay %d %s, want %d %s", r.Status, r.Body, first.Status, first.Body)
							}
						}
					})
				}
				wg.Wait()
				wantBinds("the concurrent replays", 0, 20)
				// A new key with the kept bytes: its record is missing, so it
				// binds again and runs once.
				second := h.post("/v1/widgets", tokenA, "k2", body)
				wantStatus(t, second, http.StatusCreated)
				wantBinds("a new key", 1, 1)
				wantReplay(t, h.post("/v1/widgets", tokenA, "k2", body), second)
				wantBinds("the new key's replay", 0, 1)
				if reuse := h.post("/v1/widgets", tokenA, "k1", `{"name":"w2"}`); reuse.Status != http.StatusUnprocessableEntity || reuse.code(t) != "idempotency_key_reuse" {
					t.Fatalf("key reused with another body: %d %s", reuse.Status, reuse.Body)
				}
				// Tenant b's key k1 with the same bytes is its own request.
				wantStatus(t, h.post("/v1/widgets", tokenB, "k1", body), http.StatusCreated)
				wantBinds("the key reused and tenant b", 2, 2)
				if runs, calls := h.widgets.runs.Load(), h.widgets.provider.Load(); runs != 3 || calls != 3 {
					t.Fatalf("%d runs and %d provider calls, want 3 and 3 (k1, k2, b's k1)", runs, calls)
				}
				if n := h.widgetsCount(); n != 3 {
					t.Fatalf("%d widgets, want 3", n)
				}

				// Local: the counter moves once per key.
				by := `{"by":2}`
				one := h.post("/v1/counters", tokenA, "c1", by)
				wantStatus(t, one, http.StatusOK)
				wantBinds("the counter's first request", 1, 1)
				for range 3 {
					wantReplay(t, h.post("/v1/counters", tokenA, "c1", by), one)
				}
				wantBinds("the counter's replays", 2, 3)
				// Without a key the same bytes execute each time.
				for range 2 {
					wantStatus(t, h.post("/v1/counters", tokenA, "", by), http.StatusOK)
				}
				wantBinds("requests without a key", 2, 2)
				if v := h.count("SELECT value FROM counters WHERE tenant_id = 'a'"); v != 6 {
					t.Fatalf("counter %d, want 6 (c1 once, two without a key)", v)
				}
				// Past the record's window the key is claimed anew and runs once.
				h.clock.Advance(48 * time.Hour)
				wantStatus(t, h.post("/v1/counters", tokenA, "c1", by), http.StatusOK)
				wantBinds("the request after the window", 1, 1)
				if v := h.count("SELECT value FROM counters WHERE tenant_id = 'a'"); v != 8 {
					t.Fatalf("counter %d after the window, want 8", v)
				}
			})
		})
	}
}
