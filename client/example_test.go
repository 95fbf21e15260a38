package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/client"
)

// newDemoServer is a stand-in for a retrysafe API: it stores the first
// answer per order ID or Idempotency-Key and replays it, and it loses the
// first answer to every request after committing it, as a flaky network
// would.
func newDemoServer() *httptest.Server {
	var mu sync.Mutex
	answers := map[string]string{}
	charges := 0
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		key := r.Header.Get("Idempotency-Key")
		if r.Method == http.MethodPut {
			key = r.URL.Path
		}
		mu.Lock()
		answer, replay := answers[key]
		if !replay {
			if r.Method == http.MethodPost {
				charges++
				answer = fmt.Sprintf(`{"id":"pay_%d","status":"succeeded"}`, charges)
			} else {
				answer = string(body)
			}
			answers[key] = answer
		}
		mu.Unlock()
		if !replay {
			// Committed, but the answer never reaches the client.
			conn, _, _ := http.NewResponseController(w).Hijack()
			conn.Close()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Idempotent-Replayed", "true")
		if r.Method == http.MethodPut {
			w.Header().Set("Location", r.URL.Path)
		}
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, answer)
	}))
}

func Example() {
	srv := newDemoServer()
	defer srv.Close()

	c, err := client.New(srv.URL, &client.Config{
		Token:     "sk_test_acme",
		BaseDelay: 10 * time.Millisecond,
	})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	// PUT pattern: the ID is chosen once; a retry after the lost answer
	// converges on the same order.
	order, err := c.Create(ctx, client.CreateRequest{
		Collection: "/v1/orders",
		ID:         uuid.MustParse("0195a4b2-7c1e-7d3a-9f00-000000001042"),
		Body:       []byte(`{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.00"}]}`),
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(order.Status, order.Location, "replayed:", order.Replayed, "attempts:", order.Attempts)

	// POST fallback: one Idempotency-Key for every attempt, one charge.
	pay, err := c.Post(ctx, client.PostRequest{
		Path: "/v1/payments",
		Body: []byte(`{"amount":4200,"currency":"usd","customer":"cus_8812"}`),
	})
	if err != nil {
		if e, ok := errors.AsType[*client.Error](err); ok && !e.OutcomeKnown {
			log.Fatalf("outcome unknown: retry later with key %s", e.Key)
		}
		log.Fatal(err)
	}
	fmt.Println(pay.Status, strings.TrimSpace(string(pay.Body)), "replayed:", pay.Replayed)

	// Output:
	// 201 /v1/orders/0195a4b2-7c1e-7d3a-9f00-000000001042 replayed: true attempts: 2
	// 201 {"id":"pay_1","status":"succeeded"} replayed: true
}
