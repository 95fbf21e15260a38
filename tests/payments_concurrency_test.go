package tests

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// idempotencyTable is the POST fallback's record table.
const idempotencyTable = "idempotency_records"

// post sends one payment from any goroutine: errors are returned, not fatal.
func post(client *http.Client, baseURL, token, key string, body []byte) (response, error) {
	req, err := http.NewRequest(http.MethodPost, baseURL+"/v1/payments", bytes.NewReader(body))
	if err != nil {
		return response{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := client.Do(req)
	if err != nil {
		return response{}, err
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		return response{}, err
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}, nil
}

// concurrentPayments sends n identical payments at once, request i to
// baseURLs[i % len(baseURLs)], and checks that exactly one executed: every
// answer is 201 (one fresh, the rest replays of it) or 409
// request_in_progress. It returns the fresh 201.
func concurrentPayments(t *testing.T, n int, baseURLs []string, key string) response {
	t.Helper()
	var (
		wg        sync.WaitGroup
		start     = make(chan struct{})
		responses = make([]response, n)
		errs      = make([]error, n)
		client    = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	)
	defer client.CloseIdleConnections()
	for i := range n {
		wg.Go(func() {
			<-start
			responses[i], errs[i] = post(client, baseURLs[i%len(baseURLs)], tokenAcme, key, paymentBody(4200, "pm_card_visa"))
		})
	}
	close(start)
	wg.Wait()
	var (
		fresh              []response
		replayed, inFlight int
	)
	for i, r := range responses {
		if errs[i] != nil {
			t.Fatalf("request %d: %v", i, errs[i])
		}
		switch {
		case r.Status == http.StatusCreated && r.Header.Get("Idempotent-Replayed") == "true":
			replayed++
		case r.Status == http.StatusCreated:
			fresh = append(fresh, r)
		case r.Status == http.StatusConflict:
			var p struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(r.Body, &p)
			if p.Code != "request_in_progress" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("request %d: 409 %s (Retry-After %q), want request_in_progress", i, r.Body, r.Header.Get("Retry-After"))
			}
			inFlight++
		default:
			t.Fatalf("request %d: %d %s, want 201 or 409 request_in_progress", i, r.Status, r.Body)
		}
	}
	if len(fresh) != 1 {
		t.Fatalf("%d fresh executions, want exactly 1 (%d replayed, %d in progress)", len(fresh), replayed, inFlight)
	}
	for i, r := range responses {
		if r.Status == http.StatusCreated && !bytes.Equal(r.Body, fresh[0].Body) {
			t.Fatalf("request %d got another payment: %s, want %s", i, r.Body, fresh[0].Body)
		}
	}
	t.Logf("%d requests: 1 executed, %d replayed, %d request_in_progress", n, replayed, inFlight)
	return fresh[0]
}

func TestPaymentConcurrentSameKeyExecutesOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, patient)
		first := concurrentPayments(t, 50, []string{e.srv.URL}, "k-race")
		charges := e.charges(tokenAcme, "")
		if len(charges) != 1 || first.JSON(t)["provider_charge_id"] != charges[0].ID {
			t.Fatalf("sandbox charges = %+v, want exactly the one of %s", charges, first.Body)
		}
		if n := e.count("payments", ""); n != 1 {
			t.Fatalf("%d payments, want 1", n)
		}
		wantReplay(t, e.pay(tokenAcme, "k-race", paymentBody(4200, "pm_card_visa")), first)
	})
}
