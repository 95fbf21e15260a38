package client_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/retrysafe/retrysafe/client"
)

// TestAttemptsCountTransportResends: net/http's transport silently sends a
// request with an Idempotency-Key again when its reused connection breaks
// before any answer. The client counts that re-send in Attempts although
// it made one try.
func TestAttemptsCountTransportResends(t *testing.T) {
	t.Parallel()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.ReadAll(r.Body)
		if requests.Add(1) == 2 {
			// The POST arrives on the warm connection; it breaks unanswered.
			conn, _, err := http.NewResponseController(w).Hijack()
			if err == nil {
				_ = conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"id":"pay_1"}`)
	}))
	t.Cleanup(srv.Close)

	c, err := client.New(srv.URL, &client.Config{HTTPClient: srv.Client(), MaxAttempts: 1})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if _, err := c.Get(t.Context(), "/warm-up"); err != nil {
		t.Fatalf("Get: %v", err)
	}
	res, err := c.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Body: []byte(`{}`)})
	if err != nil {
		t.Fatalf("Post: %v", err)
	}
	if res.Attempts != 2 || requests.Load() != 3 {
		t.Fatalf("Attempts = %d, server saw %d requests; want 2 sends of the POST in one try", res.Attempts, requests.Load())
	}
}
