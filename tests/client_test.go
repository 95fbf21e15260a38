package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/client"
	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// clientFault is what clientFaultTransport does to one attempt.
type clientFault int

const (
	passThrough clientFault = iota
	// loseAnswer forwards the request, lets the server commit, reads and
	// discards the answer and reports a network error.
	loseAnswer
	// fake503 answers 503 unavailable with Retry-After: 1 without
	// forwarding.
	fake503
	// fakeInProgress answers 409 request_in_progress with Retry-After: 2
	// without forwarding.
	fakeInProgress
)

// clientPlans are the fault sequences logical operations go through, one
// per operation, cycling.
var clientPlans = [][]clientFault{
	{loseAnswer},
	{fake503, loseAnswer},
	{fakeInProgress, loseAnswer, fake503},
	{loseAnswer, loseAnswer},
	{fake503, fakeInProgress},
	{},
}

// clientFaultTransport sits between the client and the real demo server.
// Each logical operation (its Idempotency-Key, or its PUT path) gets a plan;
// attempt n undergoes plan[n], later attempts pass through. It keeps the
// first successful answer the server really gave per operation, lost or
// not, and the key or ID of every attempt.
type clientFaultTransport struct {
	next http.RoundTripper

	mu       sync.Mutex
	plans    map[string][]clientFault
	sent     map[string][]string // operation → Idempotency-Key + path of every attempt
	original map[string][]byte   // operation → body of the first real 2xx answer
}

func (ft *clientFaultTransport) originalAnswer(op string) []byte {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	return ft.original[op]
}

// setPlan gives op a plan that starts with its next attempt.
func (ft *clientFaultTransport) setPlan(op string, plan []clientFault) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.plans[op] = plan
	delete(ft.sent, op)
}

func (ft *clientFaultTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	op := r.Header.Get("Idempotency-Key")
	switch r.Method {
	case http.MethodPut:
		op = r.URL.Path
	case http.MethodDelete:
		op = "DELETE " + r.URL.Path
	}
	ft.mu.Lock()
	n := len(ft.sent[op])
	ft.sent[op] = append(ft.sent[op], r.Header.Get("Idempotency-Key")+" "+r.URL.Path)
	fault := passThrough
	if plan := ft.plans[op]; n < len(plan) {
		fault = plan[n]
	}
	ft.mu.Unlock()

	switch fault {
	case fake503:
		return clientSyntheticProblem(r, http.StatusServiceUnavailable, client.CodeUnavailable, "1"), nil
	case fakeInProgress:
		return clientSyntheticProblem(r, http.StatusConflict, client.CodeRequestInProgress, "2"), nil
	}
	res, err := ft.next.RoundTrip(r)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if err != nil {
		return nil, err
	}
	if res.StatusCode/100 == 2 {
		ft.mu.Lock()
		if _, seen := ft.original[op]; !seen {
			ft.original[op] = body
		}
		ft.mu.Unlock()
	}
	if fault == loseAnswer {
		return nil, errors.New("connection reset by peer (answer lost after the server committed)")
	}
	res.Body = io.NopCloser(bytes.NewReader(body))
	return res, nil
}

func clientSyntheticProblem(r *http.Request, status int, code, retryAfter string) *http.Response {
	body := fmt.Sprintf(`{"type":"about:blank","title":%q,"status":%d,"detail":"injected by the test transport","code":%q}`,
		http.StatusText(status), status, code)
	return &http.Response{
		StatusCode: status,
		Status:     fmt.Sprintf("%d %s", status, http.StatusText(status)),
		Proto:      "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        http.Header{"Content-Type": {"application/problem+json"}, "Retry-After": {retryAfter}},
		Body:          io.NopCloser(strings.NewReader(body)),
		ContentLength: int64(len(body)),
		Request:       r,
	}
}

// wantOriginalOnce stops the test unless the transport saw exactly
// res.Attempts attempts for op, all with the same key and path, and res
// carries the first answer the server gave.
func (ft *clientFaultTransport) wantOriginalOnce(t *testing.T, op string, res *client.Result) {
	t.Helper()
	ft.mu.Lock()
	defer ft.mu.Unlock()
	sent := ft.sent[op]
	if len(sent) != res.Attempts {
		t.Fatalf("%s: transport saw %d attempts, client reports %d", op, len(sent), res.Attempts)
	}
	for _, s := range sent {
		if s != sent[0] {
			t.Fatalf("%s: attempts sent %q, want the same key and ID on every attempt", op, sent)
		}
	}
	if orig := ft.original[op]; !bytes.Equal(res.Body, orig) {
		t.Fatalf("%s: client got %s, want the original answer %s", op, res.Body, orig)
	}
	wantReplayed := slices.Contains(ft.plans[op], loseAnswer)
	if res.Replayed != wantReplayed {
		t.Fatalf("%s: Replayed = %t, want %t (plan %v)", op, res.Replayed, wantReplayed, ft.plans[op])
	}
}

// clientEnv is the demo app on a real database and a client that reaches
// it through clientFaultTransport, recording its waits instead of sleeping.
type clientEnv struct {
	*env
	client *client.Client
	faults *clientFaultTransport

	mu     sync.Mutex
	sleeps []time.Duration
}

func clientSetup(t *testing.T, dsn string, appCfg ...func(*app.Config)) *clientEnv {
	t.Helper()
	return clientSetupWith(t, dsn, nil, appCfg...)
}

// clientSetupWith is clientSetup whose requests carry the fail point
// function fp (internal/failpoint) when it is not nil.
func clientSetupWith(t *testing.T, dsn string, fp failpoint.Func, appCfg ...func(*app.Config)) *clientEnv {
	t.Helper()
	ce := &clientEnv{env: newEnvWith(t, dsn, fp, appCfg...)}
	ce.faults = &clientFaultTransport{
		next:  ce.srv.Client().Transport,
		plans: map[string][]clientFault{}, sent: map[string][]string{}, original: map[string][]byte{},
	}
	ce.client = ce.newClient(t, nil)
	return ce
}

// newClient returns a client of the demo app through the fault transport;
// tweak may change its Config. Every client of one clientEnv shares the
// transport and the record of waits, like processes sharing a network.
func (ce *clientEnv) newClient(t *testing.T, tweak func(*client.Config)) *client.Client {
	t.Helper()
	cfg := client.Config{
		HTTPClient: &http.Client{Transport: ce.faults},
		Token:      tokenAcme,
		SleepFunc: func(ctx context.Context, d time.Duration) error {
			ce.mu.Lock()
			defer ce.mu.Unlock()
			ce.sleeps = append(ce.sleeps, d)
			return ctx.Err()
		},
		RandFunc: func() float64 { return 0.5 },
	}
	if tweak != nil {
		tweak(&cfg)
	}
	c, err := client.New(ce.srv.URL, &cfg)
	if err != nil {
		t.Fatalf("client.New: %v", err)
	}
	return c
}

// sandboxChargeIDs lists the IDs of the tenant's sandbox charges.
func (ce *clientEnv) sandboxChargeIDs(t *testing.T) []string {
	t.Helper()
	r := ce.do(http.MethodGet, "/v1/sandbox/charges", tokenAcme, nil)
	wantStatus(t, r, http.StatusOK)
	var charges []struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(r.Body, &charges); err != nil {
		t.Fatalf("charges: %v: %s", err, r.Body)
	}
	ids := make([]string, 0, len(charges))
	for _, ch := range charges {
		ids = append(ids, ch.ID)
	}
	return ids
}

// skipWithoutPayments skips the test when the demo does not mount
// POST /v1/payments. Without a key the route answers 400 when mounted, 404
// when not; either way nothing is stored.
func (ce *clientEnv) skipWithoutPayments(t *testing.T) {
	t.Helper()
	if probe := ce.do(http.MethodPost, "/v1/payments", tokenAcme, []byte(`{}`)); probe.Status == http.StatusNotFound {
		t.Skip("POST /v1/payments is not mounted in the demo")
	}
}

// providerChargeID returns provider_charge_id of a payment body.
func providerChargeID(t *testing.T, body []byte) string {
	t.Helper()
	var pay struct {
		ProviderChargeID string `json:"provider_charge_id"`
	}
	if err := json.Unmarshal(body, &pay); err != nil || pay.ProviderChargeID == "" {
		t.Fatalf("payment %s: no provider_charge_id (%v)", body, err)
	}
	return pay.ProviderChargeID
}

// wantRetryAfterHonoured checks that the injected 503 (Retry-After: 1) and
// 409 (Retry-After: 2) were each followed by the wait the server asked for.
func (ce *clientEnv) wantRetryAfterHonoured(t *testing.T) {
	t.Helper()
	ce.mu.Lock()
	defer ce.mu.Unlock()
	if !slices.Contains(ce.sleeps, time.Second) || !slices.Contains(ce.sleeps, 2*time.Second) {
		t.Fatalf("waits %v: want the Retry-After waits of 1 s and 2 s", ce.sleeps)
	}
}

func TestClientCreatesOrdersOnceThroughFaults(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		const ops = 12
		for i := range ops {
			id, err := ce.client.NewID()
			if err != nil {
				t.Fatalf("NewID: %v", err)
			}
			ce.faults.setPlan(orderPath(id), clientPlans[i%len(clientPlans)])

			res, err := ce.client.Create(t.Context(), client.CreateRequest{Collection: "/v1/orders", ID: id, Body: orderBody(i+1, "10.00")})
			if err != nil {
				t.Fatalf("op %d: Create: %v", i, err)
			}
			if res.Status != http.StatusCreated || res.ID != id || res.Location != orderPath(id) || res.ETag == "" {
				t.Fatalf("op %d: status %d, ID %s, Location %q, ETag %q", i, res.Status, res.ID, res.Location, res.ETag)
			}
			ce.faults.wantOriginalOnce(t, orderPath(id), res)
			if n := ce.events("acme", id); n != 1 {
				t.Fatalf("op %d: %d order.created events, want 1", i, n)
			}
		}
		if n := ce.count("orders", "tenant_id = ?", "acme"); n != ops {
			t.Fatalf("%d orders, want %d", n, ops)
		}
		ce.wantRetryAfterHonoured(t)
	})
}

func TestClientPostsTransfersOnceThroughFaults(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		const ops = 12
		var total int64
		for i := range ops {
			key := fmt.Sprintf("transfer-%d", i)
			ce.faults.setPlan(key, clientPlans[i%len(clientPlans)])
			amount := 100 + i
			total += int64(amount)

			res, err := ce.client.Post(t.Context(), client.PostRequest{
				Path: "/v1/transfers", Key: key, Body: transferBody("acc_a", "acc_b", amount, "EUR"),
			})
			if err != nil {
				t.Fatalf("op %d: Post: %v", i, err)
			}
			if res.Status != http.StatusCreated || res.Key != key || res.Header.Get("Idempotency-Key") != key {
				t.Fatalf("op %d: status %d, key %q, echoed %q", i, res.Status, res.Key, res.Header.Get("Idempotency-Key"))
			}
			ce.faults.wantOriginalOnce(t, key, res)
		}
		if n := ce.count("transfers", "tenant_id = ?", "acme"); n != ops {
			t.Fatalf("%d transfers, want %d", n, ops)
		}
		ce.wantBalance(tokenAcme, "acc_a", -total)
		ce.wantBalance(tokenAcme, "acc_b", total)
		ce.wantRetryAfterHonoured(t)
	})
}

func TestClientPostsPaymentsOnceThroughFaults(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		ce.skipWithoutPayments(t)
		const ops = 12
		chargeIDs := map[string]bool{}
		for i := range ops {
			key := fmt.Sprintf("payment-%d", i)
			ce.faults.setPlan(key, clientPlans[i%len(clientPlans)])
			body := fmt.Appendf(nil, `{"amount":%d,"currency":"usd","customer":"cus_8812","description":"Order %d"}`, 4200+i, i)

			res, err := ce.client.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Key: key, Body: body})
			if err != nil {
				t.Fatalf("op %d: Post: %v", i, err)
			}
			if res.Status != http.StatusCreated {
				t.Fatalf("op %d: status %d: %s", i, res.Status, res.Body)
			}
			ce.faults.wantOriginalOnce(t, key, res)
			id := providerChargeID(t, res.Body)
			if chargeIDs[id] {
				t.Fatalf("op %d: charge %s was already returned to another payment", i, id)
			}
			chargeIDs[id] = true
		}
		charges := ce.sandboxChargeIDs(t)
		if len(charges) != ops {
			t.Fatalf("%d sandbox charges, want %d (one per logical payment)", len(charges), ops)
		}
		for _, id := range charges {
			if !chargeIDs[id] {
				t.Fatalf("charge %s is not the one any caller got", id)
			}
		}
		ce.wantRetryAfterHonoured(t)
	})
}

// TestClientRetriesOutcomePending: the sandbox charges and then loses its
// answer, the API says 409 outcome_pending with Retry-After, and the
// client's retry with the same key ends in 201 with the one charge.
func TestClientRetriesOutcomePending(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn, losesAnswersQuickly)
		ce.skipWithoutPayments(t)

		res, err := ce.client.Post(t.Context(), client.PostRequest{
			Path: "/v1/payments",
			Body: []byte(`{"amount":4200,"currency":"usd","customer":"cus_8812","payment_method":"pm_card_timeout_after_charge"}`),
		})
		if err != nil {
			t.Fatalf("Post: %v", err)
		}
		if res.Status != http.StatusCreated || res.Attempts < 2 {
			t.Fatalf("status %d after %d attempts, want 201 after an outcome_pending", res.Status, res.Attempts)
		}
		charges := ce.sandboxChargeIDs(t)
		if len(charges) != 1 || charges[0] != providerChargeID(t, res.Body) {
			t.Fatalf("sandbox charges %v, payment %s: want the one charge", charges, res.Body)
		}
		ce.mu.Lock()
		defer ce.mu.Unlock()
		if len(ce.sleeps) == 0 || ce.sleeps[0] < time.Second {
			t.Fatalf("waits %v: want the outcome_pending Retry-After honoured", ce.sleeps)
		}
	})
}

// TestClientResumesPaymentAfterRestart: a process persists its key in a
// file KeyStore, sends, loses the answer and dies; a new process resumes
// the operation with the same key and gets the original payment.
func TestClientResumesPaymentAfterRestart(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		ce.skipWithoutPayments(t)
		dir := t.TempDir()
		process := func(maxAttempts int) *client.Client {
			store, err := client.NewFileKeyStore(dir)
			if err != nil {
				t.Fatalf("NewFileKeyStore: %v", err)
			}
			return ce.newClient(t, func(c *client.Config) { c.KeyStore, c.MaxAttempts = store, maxAttempts })
		}
		const op = "charge-order-1042"
		body := []byte(`{"amount":4200,"currency":"usd","customer":"cus_8812","description":"Order 1042"}`)

		first := process(1)
		key, err := first.NewKey()
		if err != nil {
			t.Fatalf("NewKey: %v", err)
		}
		ce.faults.setPlan(key, []clientFault{loseAnswer})
		_, err = first.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Operation: op, Key: key, Body: body})
		if e, ok := errors.AsType[*client.Error](err); !ok || e.OutcomeKnown || e.Key != key {
			t.Fatalf("first process: err = %v, want an unknown outcome for key %s", err, key)
		}

		res, err := process(5).Post(t.Context(), client.PostRequest{Path: "/v1/payments", Operation: op, Body: body})
		if err != nil {
			t.Fatalf("restarted process: %v", err)
		}
		if res.Key != key || !res.Replayed || !bytes.Equal(res.Body, ce.faults.originalAnswer(key)) {
			t.Fatalf("restarted process: key %s replayed %t body %s; want key %s and the original payment", res.Key, res.Replayed, res.Body, key)
		}
		if charges := ce.sandboxChargeIDs(t); len(charges) != 1 || charges[0] != providerChargeID(t, res.Body) {
			t.Fatalf("sandbox charges %v: want the one charge", charges)
		}
	})
}
