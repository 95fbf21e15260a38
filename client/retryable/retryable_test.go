package retryable

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func answer(status int, code, retryAfter string) *http.Response {
	h := http.Header{"Content-Type": {"application/problem+json"}}
	if retryAfter != "" {
		h.Set("Retry-After", retryAfter)
	}
	body := `{"type":"urn:retrysafe:problem:` + code + `","status":0,"code":"` + code + `"}`
	return &http.Response{StatusCode: status, Header: h, Body: io.NopCloser(strings.NewReader(body))}
}

func TestCheckRetryRetriesExactlyTheRetryableAnswers(t *testing.T) {
	t.Parallel()
	cases := []struct {
		status int
		code   string
		retry  bool
	}{
		{201, "", false},
		{409, "request_in_progress", true},
		{409, "outcome_pending", true},
		{409, "resource_locked", false},
		{409, "currency_mismatch", false},
		{409, "", false},
		{429, "", true},
		{503, "unavailable", true},
		{502, "", true},
		{400, "validation_failed", false},
		{401, "unauthenticated", false},
		{402, "card_declined", false},
		{412, "precondition_failed", false},
		{422, "idempotency_key_reuse", false},
		{501, "", false},
	}
	for _, tc := range cases {
		resp := answer(tc.status, tc.code, "")
		retry, err := CheckRetry(context.Background(), resp, nil)
		if err != nil || retry != tc.retry {
			t.Fatalf("%d %s: retry = %t, %v; want %t", tc.status, tc.code, retry, err, tc.retry)
		}
		body, _ := io.ReadAll(resp.Body)
		if !strings.Contains(string(body), `"code":"`+tc.code+`"`) {
			t.Fatalf("%d %s: body after CheckRetry = %s, want it whole", tc.status, tc.code, body)
		}
	}
}

func TestCheckRetryTransportErrorsAndContext(t *testing.T) {
	t.Parallel()
	if retry, err := CheckRetry(context.Background(), nil, errors.New("connection reset by peer")); !retry || err != nil {
		t.Fatalf("connection reset: retry = %t, %v; want a retry", retry, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if retry, err := CheckRetry(ctx, nil, errors.New("x")); retry || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: retry = %t, %v; want no retry and context.Canceled", retry, err)
	}
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	half := func() float64 { return 0.5 }
	if d := backoff(now, half, 10*time.Millisecond, time.Second, 0, answer(503, "unavailable", "7")); d != 7*time.Second {
		t.Fatalf("Retry-After: 7 gave %v", d)
	}
	date := now.Add(3 * time.Second).Format(http.TimeFormat)
	if d := backoff(now, half, 10*time.Millisecond, time.Second, 0, answer(409, "request_in_progress", date)); d != 3*time.Second {
		t.Fatalf("Retry-After: %s gave %v", date, d)
	}
	if d := backoff(now, half, 100*time.Millisecond, time.Second, 2, nil); d != 250*time.Millisecond {
		t.Fatalf("third retry without Retry-After: %v, want 100ms + 0.5 × 300ms", d)
	}
	if d := backoff(now, func() float64 { return 1 }, 100*time.Millisecond, time.Second, 60, nil); d != time.Second {
		t.Fatalf("late retry: %v, want the 1s cap", d)
	}
}

func TestErrorHandlerKeepsTheLastAnswer(t *testing.T) {
	t.Parallel()
	resp, err := ErrorHandler(answer(503, "unavailable", "1"), nil, 5)
	if err != nil || resp.StatusCode != 503 {
		t.Fatalf("got %v, %v; want the 503", resp, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), "unavailable") {
		t.Fatalf("body %s", body)
	}
	cause := errors.New("connection refused")
	if _, err := ErrorHandler(nil, cause, 5); !errors.Is(err, ErrOutcomeUnknown) || !errors.Is(err, cause) {
		t.Fatalf("err = %v, want ErrOutcomeUnknown and the cause", err)
	}
}
