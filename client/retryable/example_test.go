package retryable_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/retrysafe/retrysafe/client/retryable"
)

// A payment whose first attempt finds the key still being executed: the
// 409 request_in_progress is retried with the same key, a final 409 would
// not be.
func Example() {
	var calls atomic.Int32
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			w.Header().Set("Content-Type", "application/problem+json")
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"type":"urn:retrysafe:problem:request_in_progress","title":"Request in progress","status":409,"code":"request_in_progress"}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":"pay_1","key":%q}`, r.Header.Get("Idempotency-Key"))
	}))
	defer api.Close()

	rc := retryable.NewClient()
	req, _ := retryablehttp.NewRequestWithContext(context.Background(), http.MethodPost, api.URL+"/v1/payments",
		[]byte(`{"amount":4200,"currency":"usd","customer":"cus_8812"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", "order-1042-payment") // once per logical operation
	resp, err := rc.Do(req)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "after", calls.Load(), "requests")
	// Output: 201 {"id":"pay_1","key":"order-1042-payment"} after 2 requests
}
