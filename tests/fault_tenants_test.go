package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/uuid"
	"pgregory.net/rapid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// isolationTenants are the tenants of the isolation property test, by token.
var isolationTenants = []struct{ token, tenant string }{
	{"sk_test_t1", "t1"}, {"sk_test_t2", "t2"}, {"sk_test_t3", "t3"},
}

// tenantModel is what one tenant did in one check: the only state its
// answers may reflect.
type tenantModel struct {
	orders    map[uuid.UUID]*modelOrder
	payments  map[string]*modelKeyed // by key
	transfers map[string]*modelKeyed // by key
	balances  map[string]int64       // accounts that exist
	payIDs    []string
	chargeIDs []string
}

type modelOrder struct {
	customer string
	quantity int
	deleted  bool
}

type modelKeyed struct {
	body  []byte
	first response
}

// isolationCheck is one run of the property: three tenants acting on the
// same small pools of IDs, keys, accounts and bodies.
type isolationCheck struct {
	e      *env
	salt   string
	ids    []uuid.UUID
	models []*tenantModel
}

func (c *isolationCheck) customer(t *rapid.T, tenant int) string {
	if rapid.Bool().Draw(t, "shared customer") {
		return "cus_" + c.salt + "_shared"
	}
	return "cus_" + c.salt + "_" + isolationTenants[tenant].tenant
}

func isolationOrderBody(customer string, qty int) []byte {
	return fmt.Appendf(nil, `{"customer":%q,"currency":"EUR","items":[{"sku":"sku_1","quantity":%d,"unit_price":"1.00"}]}`, customer, qty)
}

// wantNoLeak fails when an answer to tenant names another tenant's
// customer of this check.
func (c *isolationCheck) wantNoLeak(t *rapid.T, tenant int, r response) {
	for i, other := range isolationTenants {
		if i != tenant && bytes.Contains(r.Body, []byte("cus_"+c.salt+"_"+other.tenant)) {
			t.Fatalf("answer to %s names %s's customer: %s", isolationTenants[tenant].tenant, other.tenant, r.Body)
		}
	}
}

// want404 checks a not_found answer is the one an ID that exists nowhere
// gets: other tenants' data is indistinguishable from absent data.
func (c *isolationCheck) want404(t *rapid.T, r response, method, path, id, absentID string) {
	if r.Status != http.StatusNotFound {
		t.Fatalf("%s %s: %d, want 404: %s", method, path, r.Status, r.Body)
	}
	absent := c.e.do(method, strings.Replace(path, id, absentID, 1), isolationTenants[0].token, nil)
	got := bytes.ReplaceAll(r.Body, []byte(id), []byte("{id}"))
	want := bytes.ReplaceAll(absent.Body, []byte(absentID), []byte("{id}"))
	if absent.Status != http.StatusNotFound || !bytes.Equal(got, want) {
		t.Fatalf("%s %s: 404 body differs from an absent one's:\n%s\n%s", method, path, r.Body, absent.Body)
	}
}

func (c *isolationCheck) putOrder(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	id := c.ids[rapid.IntRange(0, len(c.ids)-1).Draw(t, "order")]
	customer, qty := c.customer(t, tn), rapid.IntRange(1, 2).Draw(t, "quantity")
	m := c.models[tn]
	r := c.e.do(http.MethodPut, orderPath(id), isolationTenants[tn].token, isolationOrderBody(customer, qty))
	c.wantNoLeak(t, tn, r)
	own, exists := m.orders[id]
	switch {
	case !exists:
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("first PUT of %s by %s: %d replayed=%q, want a fresh 201: %s", id, isolationTenants[tn].tenant, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
		}
		m.orders[id] = &modelOrder{customer: customer, quantity: qty}
	case own.deleted:
		if r.Status != http.StatusGone {
			t.Fatalf("PUT of own deleted %s: %d, want 410: %s", id, r.Status, r.Body)
		}
	default:
		if r.Status != http.StatusOK && r.Status != http.StatusCreated {
			t.Fatalf("PUT of own %s: %d, want 200 or a 201 replay: %s", id, r.Status, r.Body)
		}
		own.customer, own.quantity = customer, qty
	}
	if r.Status < 300 {
		c.wantOrder(t, tn, id, r)
	}
}

// wantOrder checks a representation against the tenant's model.
func (c *isolationCheck) wantOrder(t *rapid.T, tn int, id uuid.UUID, r response) {
	var o struct {
		ID       string `json:"id"`
		Customer string `json:"customer"`
		Items    []struct {
			Quantity int `json:"quantity"`
		} `json:"items"`
	}
	if err := json.Unmarshal(r.Body, &o); err != nil || len(o.Items) != 1 {
		t.Fatalf("order %s: %v: %s", id, err, r.Body)
	}
	want := c.models[tn].orders[id]
	if o.ID != id.String() || o.Customer != want.customer || o.Items[0].Quantity != want.quantity {
		t.Fatalf("order %s of %s: got %s, want customer %s quantity %d", id, isolationTenants[tn].tenant, r.Body, want.customer, want.quantity)
	}
}

func (c *isolationCheck) getOrder(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	id := c.ids[rapid.IntRange(0, len(c.ids)-1).Draw(t, "order")]
	r := c.e.do(http.MethodGet, orderPath(id), isolationTenants[tn].token, nil)
	c.wantNoLeak(t, tn, r)
	if own, ok := c.models[tn].orders[id]; ok && !own.deleted {
		rapidStatus(t, r, http.StatusOK)
		c.wantOrder(t, tn, id, r)
		return
	}
	c.want404(t, r, http.MethodGet, orderPath(id), id.String(), uuid.NewString())
}

func (c *isolationCheck) deleteOrder(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	id := c.ids[rapid.IntRange(0, len(c.ids)-1).Draw(t, "order")]
	r := c.e.do(http.MethodDelete, orderPath(id), isolationTenants[tn].token, nil)
	if own, ok := c.models[tn].orders[id]; ok && !own.deleted {
		rapidStatus(t, r, http.StatusNoContent)
		own.deleted = true
		return
	}
	c.want404(t, r, http.MethodDelete, orderPath(id), id.String(), uuid.NewString())
}

func (c *isolationCheck) listOrders(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	var got, want []string
	path := "/v1/orders?limit=100"
	for pages := 0; ; pages++ {
		r := c.e.do(http.MethodGet, path, isolationTenants[tn].token, nil)
		rapidStatus(t, r, http.StatusOK)
		c.wantNoLeak(t, tn, r)
		var page struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
			NextCursor *string `json:"next_cursor"`
		}
		if err := json.Unmarshal(r.Body, &page); err != nil {
			t.Fatalf("list: %v: %s", err, r.Body)
		}
		for _, it := range page.Items {
			if id, err := uuid.Parse(it.ID); err == nil && slices.Contains(c.ids, id) {
				got = append(got, it.ID)
			}
		}
		if page.NextCursor == nil || *page.NextCursor == "" || pages > 100 {
			break
		}
		path = "/v1/orders?limit=100&cursor=" + url.QueryEscape(*page.NextCursor)
	}
	for id, o := range c.models[tn].orders {
		if !o.deleted {
			want = append(want, id.String())
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("%s lists %v of this check's IDs, want %v", isolationTenants[tn].tenant, got, want)
	}
}

// keyed sends a POST with a key from the pool and checks it against the
// tenant's own use of that key only.
func (c *isolationCheck) keyed(t *rapid.T, tn int, path, key string, body []byte, uses map[string]*modelKeyed) (response, bool) {
	r := c.e.do(http.MethodPost, path, isolationTenants[tn].token, body, "Idempotency-Key", key)
	c.wantNoLeak(t, tn, r)
	prev, used := uses[key]
	switch {
	case !used:
		if r.Status != http.StatusCreated || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("%s: first use of key %s by %s: %d replayed=%q, want a fresh 201: %s", path, key, isolationTenants[tn].tenant, r.Status, r.Header.Get("Idempotent-Replayed"), r.Body)
		}
		uses[key] = &modelKeyed{body: body, first: r}
		return r, true
	case bytes.Equal(prev.body, body):
		rapidReplay(t, r, prev.first)
	default:
		rapidStatus(t, r, http.StatusUnprocessableEntity)
	}
	return r, false
}

func (c *isolationCheck) pay(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	key := fmt.Sprintf("%s-pay-%d", c.salt, rapid.IntRange(0, 2).Draw(t, "key"))
	body := fmt.Appendf(nil, `{"amount":%d,"currency":"usd","customer":%q}`, 100*rapid.IntRange(1, 2).Draw(t, "amount"), c.customer(t, tn))
	r, fresh := c.keyed(t, tn, "/v1/payments", key, body, c.models[tn].payments)
	if !fresh {
		return
	}
	var p struct {
		ID       string `json:"id"`
		ChargeID string `json:"provider_charge_id"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatal(err)
	}
	for i, other := range c.models {
		if i != tn && (slices.Contains(other.payIDs, p.ID) || slices.Contains(other.chargeIDs, p.ChargeID)) {
			t.Fatalf("%s's payment %s is %s's", isolationTenants[tn].tenant, r.Body, isolationTenants[i].tenant)
		}
	}
	c.models[tn].payIDs = append(c.models[tn].payIDs, p.ID)
	c.models[tn].chargeIDs = append(c.models[tn].chargeIDs, p.ChargeID)
}

func (c *isolationCheck) getPayment(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	owner := rapid.IntRange(0, 2).Draw(t, "owner")
	if len(c.models[owner].payIDs) == 0 {
		t.Skip("no payment yet")
	}
	id := rapid.SampledFrom(c.models[owner].payIDs).Draw(t, "payment")
	r := c.e.do(http.MethodGet, "/v1/payments/"+id, isolationTenants[tn].token, nil)
	c.wantNoLeak(t, tn, r)
	if owner == tn {
		rapidStatus(t, r, http.StatusOK)
		return
	}
	c.want404(t, r, http.MethodGet, "/v1/payments/"+id, id, "pay_"+strings.ReplaceAll(uuid.NewString(), "-", ""))
}

func (c *isolationCheck) transfer(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	key := fmt.Sprintf("%s-tr-%d", c.salt, rapid.IntRange(0, 2).Draw(t, "key"))
	from := rapid.IntRange(0, 2).Draw(t, "from")
	to := (from + rapid.IntRange(1, 2).Draw(t, "to")) % 3
	amount := int64(rapid.IntRange(1, 3).Draw(t, "amount"))
	fromName, toName := c.account(from), c.account(to)
	if _, fresh := c.keyed(t, tn, "/v1/transfers", key, transferBody(fromName, toName, int(amount), "EUR"), c.models[tn].transfers); fresh {
		c.models[tn].balances[fromName] -= amount
		c.models[tn].balances[toName] += amount
	}
}

func (c *isolationCheck) account(i int) string { return fmt.Sprintf("a%s_%d", c.salt, i) }

func (c *isolationCheck) getAccount(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	name := c.account(rapid.IntRange(0, 2).Draw(t, "account"))
	r := c.e.do(http.MethodGet, "/v1/accounts/"+name, isolationTenants[tn].token, nil)
	want, ok := c.models[tn].balances[name]
	if !ok {
		c.want404(t, r, http.MethodGet, "/v1/accounts/"+name, name, "a"+c.salt+"_absent")
		return
	}
	rapidStatus(t, r, http.StatusOK)
	if got := rapidBalance(t, r); got != want {
		t.Fatalf("balance of %s for %s = %d, want %d", name, isolationTenants[tn].tenant, got, want)
	}
}

func (c *isolationCheck) listCharges(t *rapid.T) {
	tn := rapid.IntRange(0, 2).Draw(t, "tenant")
	r := c.e.do(http.MethodGet, "/v1/sandbox/charges", isolationTenants[tn].token, nil)
	rapidStatus(t, r, http.StatusOK)
	var charges []sandboxCharge
	if err := json.Unmarshal(r.Body, &charges); err != nil {
		t.Fatal(err)
	}
	listed := map[string]bool{}
	for _, ch := range charges {
		listed[ch.ID] = true
	}
	for i, m := range c.models {
		for _, id := range m.chargeIDs {
			if listed[id] != (i == tn) {
				t.Fatalf("charge %s of %s: listed to %s = %v", id, isolationTenants[i].tenant, isolationTenants[tn].tenant, listed[id])
			}
		}
	}
}

// rapidStatus stops the check when r has another status.
func rapidStatus(t *rapid.T, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
}

// rapidReplay stops the check unless r replays first byte for byte.
func rapidReplay(t *rapid.T, r, first response) {
	t.Helper()
	if r.Status != first.Status || !bytes.Equal(r.Body, first.Body) || r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("not a replay of the tenant's own answer:\n%d %v %s\nfirst %d %s", r.Status, r.Header, r.Body, first.Status, first.Body)
	}
}

func rapidBalance(t *rapid.T, r response) int64 {
	var a struct {
		Balance int64 `json:"balance"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil {
		t.Fatalf("account: %v: %s", err, r.Body)
	}
	return a.Balance
}

// TestFaultTenantIsolation is a property test: three tenants act at random
// on the same few order IDs, idempotency keys, account names and bodies
// (deliberate collisions), and each tenant's answers follow from its own
// actions alone. No tenant reads, replays, deletes, lists or overwrites
// another's data, and a 404 for another tenant's ID is the 404 of an ID
// that exists nowhere. On SQLite and PostgreSQL; -rapid.checks=N runs more.
func TestFaultTenantIsolation(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		tokens := map[string]string{}
		for _, tt := range isolationTenants {
			tokens[tt.token] = tt.tenant
		}
		e := newEnv(t, dsn, func(c *app.Config) { c.Tokens = tokens })
		var checks atomic.Int64
		rapid.Check(t, func(rt *rapid.T) {
			c := &isolationCheck{e: e, salt: fmt.Sprintf("%d%s", checks.Add(1), uuid.NewString()[:6])}
			for i := range 3 {
				c.ids = append(c.ids, uuid.NewSHA1(uuid.NameSpaceURL, []byte(c.salt+fmt.Sprint(i))))
			}
			for range isolationTenants {
				c.models = append(c.models, &tenantModel{orders: map[uuid.UUID]*modelOrder{},
					payments: map[string]*modelKeyed{}, transfers: map[string]*modelKeyed{}, balances: map[string]int64{}})
			}
			rt.Repeat(map[string]func(*rapid.T){
				"putOrder":    c.putOrder,
				"getOrder":    c.getOrder,
				"deleteOrder": c.deleteOrder,
				"listOrders":  c.listOrders,
				"pay":         c.pay,
				"getPayment":  c.getPayment,
				"transfer":    c.transfer,
				"getAccount":  c.getAccount,
				"listCharges": c.listCharges,
			})
		})
	})
}
