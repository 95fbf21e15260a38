package main

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// scenario is one kind of traffic.
type scenario struct {
	name  string
	about string
	// allowNon2xx marks scenarios where a non-2xx answer is part of the
	// contract under contention (409 request_in_progress on a hot row).
	allowNon2xx bool
	// hot scenarios send one key or ID from every client at once.
	hot bool
	// postgresOnly scenarios are left out on SQLite.
	postgresOnly bool
	// prepare creates what the scenario replays or reads, through the
	// HTTP API, before the timed rounds.
	prepare func(ctx context.Context, l *loader, n int) error
	next    func(cl *client) request
	// replicaReads scenarios may be answered from a replica (GET, a
	// completed POST's replay); with -replica each runs again as
	// NAME@replica, onReplica, on the server that reads the standby.
	replicaReads, onReplica bool
}

// replicaSuffix names a scenario's run on the server that reads a replica.
const replicaSuffix = "@replica"

// withReplicaTwins returns scs with, after each scenario that may read a
// replica, its twin on the replica's server: the same requests, on the
// same prepared rows.
func withReplicaTwins(scs []*scenario) []*scenario {
	var out []*scenario
	for _, sc := range scs {
		out = append(out, sc)
		if sc.replicaReads {
			out = append(out, &scenario{name: sc.name + replicaSuffix, about: sc.about + ", on a server that reads a hot standby",
				allowNon2xx: sc.allowNon2xx, next: sc.next, onReplica: true})
		}
	}
	return out
}

// baselines names the scenarios sc's throughput is compared with, naive
// first: a create also with the naive create that writes the same outbox
// event and with the floor, a replay also with the naive replay.
func (sc *scenario) baselines() []string {
	if primary, ok := strings.CutSuffix(sc.name, replicaSuffix); ok {
		return []string{primary}
	}
	switch sc.name {
	case "naive":
		return nil
	case "put-create", "legacy-post-create", "post-local-create":
		return []string{"naive", "naive-outbox", "floor"}
	case "put-replay", "legacy-post-replay", "post-local-replay", "payments-replay":
		return []string{"naive", "naive-replay"}
	}
	return []string{"naive"}
}

// The request bodies of the bench.
var (
	orderBody = []byte(`{"customer":"cus_1","currency":"EUR","items":[` +
		`{"sku":"sku_1","quantity":2,"unit_price":"10.00"},{"sku":"sku_2","quantity":1,"unit_price":"5.50"}],"note":"bench"}`)
	paymentBody = []byte(`{"amount":4200,"currency":"usd","customer":"cus_1","description":"bench","payment_method":"pm_card_visa"}`)
)

func transferBody(from, to string, amount int) []byte {
	return []byte(`{"from_account":"` + from + `","to_account":"` + to + `","amount":` + strconv.Itoa(amount) + `,"currency":"EUR"}`)
}

func putOrder(id uuid.UUID) request {
	return request{method: http.MethodPut, path: "/v1/orders/" + id.String(), body: orderBody}
}

// patchOrder is a merge patch of an order (application/json is one).
func patchOrder(id uuid.UUID, patch []byte) request {
	return request{method: http.MethodPatch, path: "/v1/orders/" + id.String(), body: patch}
}

// key is unique per scenario run, client and request.
func (cl *client) key(prefix string) string {
	return prefix + "-" + cl.run + "-" + strconv.Itoa(cl.id) + "-" + strconv.Itoa(cl.n)
}

// hotSlice is how long the hot-key scenario stays on one key before all
// clients move to the next.
const hotSlice = 100 * time.Millisecond

// scenarios returns every scenario in the order the rounds run them.
func scenarios() []*scenario {
	var (
		naiveIDs     []string
		orderIDs     []uuid.UUID
		patchIDs     []uuid.UUID
		replaceIDs   []uuid.UUID
		legacyKeys   []string
		transferReqs []request
		paymentKeys  []string
		replayKeys   []string
	)
	pick := func(cl *client, n int) int { return (cl.id*7919 + cl.n) % n }
	// createOrders creates orders through the API until ids holds n.
	createOrders := func(ids *[]uuid.UUID) func(ctx context.Context, l *loader, n int) error {
		return func(ctx context.Context, l *loader, n int) error {
			for len(*ids) < n {
				id := uuid.New()
				if err := l.must(ctx, putOrder(id), http.StatusCreated); err != nil {
					return err
				}
				*ids = append(*ids, id)
			}
			return nil
		}
	}
	// keyedPosts prepares n POSTs of body to path, each with a new key
	// (prefix-replay-…), and
	// returns the scenario's next request: one of them again.
	keyedPosts := func(prefix, path string, body []byte, keys *[]string) (func(ctx context.Context, l *loader, n int) error, func(cl *client) request) {
		prepare := func(ctx context.Context, l *loader, n int) error {
			for range n {
				k := prefix + "-replay-" + uuid.NewString()
				if err := l.must(ctx, request{method: http.MethodPost, path: path, body: body, key: k}, http.StatusCreated); err != nil {
					return err
				}
				*keys = append(*keys, k)
			}
			return nil
		}
		next := func(cl *client) request {
			return request{method: http.MethodPost, path: path, body: body, key: (*keys)[pick(cl, len(*keys))]}
		}
		return prepare, next
	}
	prepareNaiveReplay, nextNaiveReplay := keyedPosts("naive", "/naive/replay/orders", orderBody, &replayKeys)
	prepareLegacyReplay, nextLegacyReplay := keyedPosts("legacy", "/v1/orders", orderBody, &legacyKeys)
	preparePaymentReplay, nextPaymentReplay := keyedPosts("payment", "/v1/payments", paymentBody, &paymentKeys)
	// put-replay, patch-replay and get share their orders, which none of
	// them changes; patch changes its own.
	prepareOrders := createOrders(&orderIDs)
	return []*scenario{
		{
			name: "naive", about: "gin + gorm db.Create of the order and its items in gorm's default transaction, no idempotency",
			next: func(*client) request { return request{method: http.MethodPost, path: "/naive/orders", body: orderBody} },
		},
		{
			name: "naive-outbox", about: "naive, plus an order.created outbox row in the same gorm transaction, drained by a polling relay",
			next: func(*client) request {
				return request{method: http.MethodPost, path: "/naive/outbox/orders", body: orderBody}
			},
		},
		{
			name: "floor", about: "the order, its items and the outbox row as one pgx batch: one round trip, no ORM, no checks",
			postgresOnly: true,
			next: func(*client) request {
				return request{method: http.MethodPost, path: "/naive/floor/orders", body: orderBody}
			},
		},
		{
			name: "naive-replay", about: "a hand-written Idempotency-Key middleware's replay: SHA-256 of the body, one row read by primary key, its bytes written",
			prepare: prepareNaiveReplay,
			next:    nextNaiveReplay,
		},
		{
			name: "naive-get", about: "gin + gorm read of an order and its items",
			prepare: func(ctx context.Context, l *loader, n int) error {
				for range n {
					id, err := l.createNaive(ctx)
					if err != nil {
						return err
					}
					naiveIDs = append(naiveIDs, id)
				}
				return nil
			},
			next: func(cl *client) request {
				return request{method: http.MethodGet, path: "/naive/orders/" + naiveIDs[pick(cl, len(naiveIDs))]}
			},
		},
		{
			name: "put-create", about: "PUT /v1/orders/{new uuid}",
			next: func(*client) request { return putOrder(uuid.New()) },
		},
		{
			name: "put-replay", about: "the same PUT again (within the replay window)",
			prepare: prepareOrders,
			next:    func(cl *client) request { return putOrder(orderIDs[pick(cl, len(orderIDs))]) },
		},
		{
			name: "patch", about: "PATCH /v1/orders/{id} with a merge patch that changes the note: a locked read and a replace",
			prepare: createOrders(&patchIDs),
			next: func(cl *client) request {
				return patchOrder(patchIDs[pick(cl, len(patchIDs))], []byte(`{"note":"`+cl.key("patch")+`"}`))
			},
		},
		{
			name: "put-replace", about: "PUT /v1/orders/{id} of an existing order with another note: a read, a locked read and a replace",
			prepare: createOrders(&replaceIDs),
			next: func(cl *client) request {
				body := bytes.Replace(orderBody, []byte(`"note":"bench"`), []byte(`"note":"`+cl.key("replace")+`"`), 1)
				return request{method: http.MethodPut, path: "/v1/orders/" + replaceIDs[pick(cl, len(replaceIDs))].String(), body: body}
			},
		},
		{
			name: "patch-replay", about: "a PATCH whose result is the current state: a locked read, nothing written",
			prepare: prepareOrders,
			next: func(cl *client) request {
				return patchOrder(orderIDs[pick(cl, len(orderIDs))], []byte(`{"note":"bench"}`))
			},
		},
		{
			name: "get", replicaReads: true, about: "GET /v1/orders/{id}",
			prepare: prepareOrders,
			next: func(cl *client) request {
				return request{method: http.MethodGet, path: "/v1/orders/" + orderIDs[pick(cl, len(orderIDs))].String()}
			},
		},
		{
			name: "legacy-post-create", about: "POST /v1/orders with a new Idempotency-Key",
			next: func(cl *client) request {
				return request{method: http.MethodPost, path: "/v1/orders", body: orderBody, key: cl.key("lo")}
			},
		},
		{
			name: "legacy-post-replay", about: "the same legacy POST again",
			prepare: prepareLegacyReplay,
			next:    nextLegacyReplay,
		},
		{
			name: "post-local-create", about: "POST /v1/transfers (local mode) between two of 1000 accounts, new key",
			next: func(cl *client) request {
				from := cl.rng.IntN(1000)
				to := (from + 1 + cl.rng.IntN(999)) % 1000
				return request{method: http.MethodPost, path: "/v1/transfers", key: cl.key("tr"),
					body: transferBody("acc_"+strconv.Itoa(from), "acc_"+strconv.Itoa(to), 1+cl.rng.IntN(100))}
			},
		},
		{
			name: "post-local-replay", replicaReads: true, about: "the same transfer again",
			prepare: func(ctx context.Context, l *loader, n int) error {
				for i := range n {
					r := request{method: http.MethodPost, path: "/v1/transfers", key: "transfer-replay-" + uuid.NewString(),
						body: transferBody("acc_"+strconv.Itoa(i%1000), "acc_"+strconv.Itoa((i+1)%1000), 1+i%100)}
					if err := l.must(ctx, r, http.StatusCreated); err != nil {
						return err
					}
					transferReqs = append(transferReqs, r)
				}
				return nil
			},
			next: func(cl *client) request { return transferReqs[pick(cl, len(transferReqs))] },
		},
		{
			name: "transfers-hot", about: "POST /v1/transfers, all between the same 2 accounts (row-lock contention)", allowNon2xx: true,
			next: func(cl *client) request {
				from, to := "acc_hot_a", "acc_hot_b"
				if cl.n%2 == 1 {
					from, to = to, from
				}
				return request{method: http.MethodPost, path: "/v1/transfers", key: cl.key("th"), body: transferBody(from, to, 1)}
			},
		},
		{
			name: "payments-create", about: "POST /v1/payments (phased mode, sandbox provider), new key",
			next: func(cl *client) request {
				return request{method: http.MethodPost, path: "/v1/payments", body: paymentBody, key: cl.key("pay")}
			},
		},
		{
			name: "payments-replay", replicaReads: true, about: "the same payment again",
			prepare: preparePaymentReplay,
			next:    nextPaymentReplay,
		},
		{
			name: "hot-key", hot: true, allowNon2xx: true,
			about: "every client sends the same request at once: a new key every " + hotSlice.String() + ", cycling PUT order, transfer and payment",
			next: func(cl *client) request {
				slice := int(time.Since(cl.start) / hotSlice)
				key := "hot-" + cl.run + "-" + strconv.Itoa(slice)
				switch slice % 3 {
				case 0:
					return putOrder(uuid.NewSHA1(uuid.NameSpaceOID, []byte(key)))
				case 1:
					return request{method: http.MethodPost, path: "/v1/transfers", key: key, body: transferBody("acc_hk_a", "acc_hk_b", 1)}
				default:
					return request{method: http.MethodPost, path: "/v1/payments", key: key, body: paymentBody}
				}
			},
		},
	}
}

// createNaive creates one order through the naive handler and returns its ID.
func (l *loader) createNaive(ctx context.Context) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, l.base+"/naive/orders", strings.NewReader(string(orderBody)))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	res, err := l.http.Do(req)
	if err != nil {
		return "", err
	}
	res.Body.Close()
	if res.StatusCode != http.StatusCreated {
		return "", fmt.Errorf("bench: naive create: status %d", res.StatusCode)
	}
	return strings.TrimPrefix(res.Header.Get("Location"), "/naive/orders/"), nil
}

// selectScenarios keeps the named scenarios (all when names is empty),
// in their run order. A scenario that reads what another prepares pulls
// the preparation along. A PostgreSQL-only scenario is left out on
// another dialect, named or not.
func selectScenarios(names, dialect string) ([]*scenario, error) {
	want := map[string]bool{}
	for n := range strings.SplitSeq(names, ",") {
		want[strings.TrimSpace(n)] = true
	}
	var out []*scenario
	for _, sc := range scenarios() {
		if names != "" && !want[sc.name] {
			continue
		}
		delete(want, sc.name)
		if !sc.postgresOnly || dialect == "postgres" {
			out = append(out, sc)
		}
	}
	if names == "" {
		return out, nil
	}
	for n := range want {
		return nil, fmt.Errorf("bench: unknown scenario %q", n)
	}
	return out, nil
}
