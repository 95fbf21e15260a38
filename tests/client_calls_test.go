package tests

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/client"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/orders"
)

func draftOrder(qty int64) orders.Command {
	return orders.Command{Customer: "cus_1", Currency: "EUR", Items: []orders.Item{{SKU: "sku_1", Quantity: qty, UnitPrice: "2.50"}}}
}

// TestClientReadReplaceDelete walks one order through the client's calls
// against the demo: Create from a struct, Get, a conditional Replace,
// Delete, each through lost answers, with one effect each.
func TestClientReadReplaceDelete(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		ctx := t.Context()
		id, _ := ce.client.NewID()
		path := orderPath(id)

		ce.faults.setPlan(path, []clientFault{loseAnswer})
		created, err := ce.client.Create(ctx, client.CreateRequest{Collection: "/v1/orders", ID: id, Value: draftOrder(2)})
		if err != nil {
			t.Fatalf("Create: %v", err)
		}
		order, err := client.Decode[orders.Representation](created)
		if err != nil || order.ID != id.String() || order.Total != "5.00" || order.Version != 1 {
			t.Fatalf("created order %+v, %v", order, err)
		}

		got, err := ce.client.Get(ctx, path)
		if err != nil || got.Status != http.StatusOK || got.ETag != created.ETag {
			t.Fatalf("Get: %v, %+v; want 200 with ETag %s", err, got, created.ETag)
		}

		// An unconditional replace whose answer is lost is replayed on retry:
		// one new version, not two.
		ce.faults.setPlan(path, []clientFault{loseAnswer})
		replaced, err := ce.client.Replace(ctx, client.ReplaceRequest{Collection: "/v1/orders", ID: id, Value: draftOrder(3)})
		if err != nil || replaced.Status != http.StatusOK || replaced.Attempts != 2 {
			t.Fatalf("Replace: %v, %+v; want 200 after 2 attempts", err, replaced)
		}
		if v := ce.order("acme", id).Version; v != 2 {
			t.Fatalf("version %d after one replace, want 2", v)
		}

		// A conditional replace on the current ETag succeeds once.
		ce.faults.setPlan(path, nil)
		next, err := ce.client.Replace(ctx, client.ReplaceRequest{Collection: "/v1/orders", ID: id, IfMatch: replaced.ETag, Value: draftOrder(4)})
		if err != nil || next.ETag == replaced.ETag {
			t.Fatalf("Replace with If-Match: %v, %+v", err, next)
		}
		// A stale one is a definitive 412.
		_, err = ce.client.Replace(ctx, client.ReplaceRequest{Collection: "/v1/orders", ID: id, IfMatch: replaced.ETag, Value: draftOrder(5)})
		if e, ok := errors.AsType[*client.Error](err); !ok || e.Status != http.StatusPreconditionFailed || !e.OutcomeKnown || e.Code != client.CodePreconditionFailed {
			t.Fatalf("stale If-Match: err = %v, want a known 412", err)
		}
		// A conditional replace whose answer is lost: the retry's If-Match
		// is stale, but its body is the current state, so it converges.
		ce.faults.setPlan(path, []clientFault{loseAnswer})
		converged, err := ce.client.Replace(ctx, client.ReplaceRequest{Collection: "/v1/orders", ID: id, IfMatch: next.ETag, Value: draftOrder(6)})
		if err != nil || converged.Status != http.StatusOK || !converged.Replayed || converged.Attempts != 2 || converged.ETag == next.ETag {
			t.Fatalf("conditional Replace after a lost answer: %v, %+v; want a converged 200", err, converged)
		}
		if v := ce.order("acme", id).Version; v != 4 {
			t.Fatalf("version %d, want 4 (the lost replace applied once)", v)
		}

		// A delete whose answer is lost ends in the retry's 404: done.
		ce.faults.setPlan("DELETE "+path, []clientFault{loseAnswer})
		deleted, err := ce.client.Delete(ctx, path, "")
		if err != nil || deleted.Status != http.StatusNotFound || deleted.Attempts != 2 {
			t.Fatalf("Delete: %v, %+v; want the retry's 404 as success", err, deleted)
		}
		if r := ce.order("acme", id); r.DeletedAt == nil {
			t.Fatal("the order is not deleted")
		}
		_, err = ce.client.Get(ctx, path)
		if p, ok := client.ProblemOf(err); !ok || string(p.Code) != client.CodeNotFound {
			t.Fatalf("Get after Delete: %v, want not_found", err)
		}
		// A delete of a missing resource, answered at once, is an error.
		if _, err := ce.client.Delete(ctx, path, ""); err == nil {
			t.Fatal("second Delete succeeded; want 404 not_found")
		}
	})
}

func TestClientListFollowsCursor(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		want := map[string]bool{}
		for i := range 7 {
			res, err := ce.client.Create(t.Context(), client.CreateRequest{Collection: "/v1/orders", Value: draftOrder(int64(i + 1))})
			if err != nil {
				t.Fatalf("Create: %v", err)
			}
			want[res.ID.String()] = true
		}
		seen := map[string]bool{}
		for item, err := range ce.client.List(t.Context(), client.ListRequest{Path: "/v1/orders", Limit: 3}) {
			if err != nil {
				t.Fatalf("List: %v", err)
			}
			o, err := client.Decode[orders.Representation](&client.Result{Body: item})
			if err != nil || !want[o.ID] || seen[o.ID] {
				t.Fatalf("item %s: %v (seen before: %t)", item, err, seen[o.ID])
			}
			seen[o.ID] = true
		}
		if len(seen) != len(want) {
			t.Fatalf("List gave %d orders, want %d", len(seen), len(want))
		}
		for _, err := range ce.client.List(t.Context(), client.ListRequest{Path: "/v1/orders", Limit: 1000}) {
			if p, ok := client.ProblemOf(err); !ok || string(p.Code) != client.CodeValidationFailed {
				t.Fatalf("limit 1000: err = %v, want validation_failed", err)
			}
		}
	})
}

// TestClientRefusesExpiredKey: a key saved longer ago than the replay
// window is not sent, since the server would run the payment again.
func TestClientRefusesExpiredKey(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		store, err := client.NewFileKeyStore(t.TempDir())
		if err != nil {
			t.Fatalf("NewFileKeyStore: %v", err)
		}
		now := time.Now()
		newClient := func(at time.Time) *client.Client {
			return ce.newClient(t, func(c *client.Config) {
				c.KeyStore, c.NowFunc, c.MaxAttempts = store, func() time.Time { return at }, 1
			})
		}
		const op = "transfer-1042"
		key, _ := ce.client.NewKey()
		ce.faults.setPlan(key, []clientFault{loseAnswer})
		body := transferBody("acc_a", "acc_b", 100, "EUR")
		if _, err := newClient(now).Post(t.Context(), client.PostRequest{Path: "/v1/transfers", Operation: op, Key: key, Body: body}); err == nil {
			t.Fatal("the lost answer was not reported")
		}
		res, err := newClient(now.Add(23*time.Hour)).Post(t.Context(), client.PostRequest{Path: "/v1/transfers", Operation: op, Body: body})
		if err != nil || !res.Replayed || res.Key != key {
			t.Fatalf("within the window: %v, %+v; want the replay", err, res)
		}
		_, err = newClient(now.Add(25*time.Hour)).Post(t.Context(), client.PostRequest{Path: "/v1/transfers", Operation: op, Body: body})
		var expired *client.KeyExpiredError
		if !errors.Is(err, client.ErrKeyExpired) || !errors.As(err, &expired) || expired.Key != key || expired.Operation != op {
			t.Fatalf("after the window: err = %v, want a KeyExpiredError for %s", err, key)
		}
		if n := len(ce.faults.sent[key]); n != 2 {
			t.Fatalf("%d requests with the key, want 2 (none after the window)", n)
		}
		if n := ce.count("transfers", "tenant_id = ?", "acme"); n != 1 {
			t.Fatalf("%d transfers, want 1", n)
		}
		if err := newClient(now.Add(25*time.Hour)).Forget(t.Context(), op); err != nil {
			t.Fatalf("Forget: %v", err)
		}
	})
}
