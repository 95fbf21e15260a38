package client

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"slices"
	"syscall"
	"testing"

	"pgregory.net/rapid"

	"github.com/retrysafe/retrysafe/wire"
)

// allCodes is every generic problem code of the wire contract plus
// business codes that services register for themselves.
var allCodes = func() []string {
	codes := []string{"card_declined", "currency_mismatch", "insufficient_funds"}
	for _, info := range wire.Generic() {
		codes = append(codes, string(info.Code))
	}
	return codes
}()

// wantDecision is the decision table written independently of Classify,
// straight from the issue.
func wantDecision(status int, code string) Decision {
	switch {
	case status >= 200 && status < 300:
		return Done
	case status == 401:
		return Refresh
	case slices.Contains([]int{408, 425, 429, 500, 502, 503, 504}, status):
		return Retry
	case status == 409 && (code == "request_in_progress" || code == "outcome_pending"):
		return Retry
	}
	return Fail
}

func TestClassifyTable(t *testing.T) {
	t.Parallel()
	// Exhaustive over every status and contract code.
	for status := 100; status <= 599; status++ {
		for _, code := range append([]string{""}, allCodes...) {
			if got, want := Classify(status, code, nil), wantDecision(status, code); got != want {
				t.Fatalf("Classify(%d, %q, nil) = %v, want %v", status, code, got, want)
			}
		}
	}
	// Definitive answers named by the issue are never retried.
	for _, status := range []int{400, 402, 404, 410, 412, 413, 422} {
		for _, code := range allCodes {
			if d := Classify(status, code, nil); d != Fail {
				t.Fatalf("Classify(%d, %q) = %v, want fail", status, code, d)
			}
		}
	}
}

// TestClassifyAnswerRetryAfter: a code the client does not know is judged
// by its status and Retry-After; a known final code never becomes
// retryable because of a Retry-After.
func TestClassifyAnswerRetryAfter(t *testing.T) {
	t.Parallel()
	tests := []struct {
		status     int
		code       string
		retryAfter bool
		want       Decision
	}{
		{409, "ledger_busy", true, Retry},
		{409, "ledger_busy", false, Fail},
		{409, "currency_mismatch", false, Fail},
		{409, CodeResourceLocked, true, Fail},
		{409, CodeRequestInProgress, false, Retry},
		{402, "card_declined", true, Fail},
		{422, "insufficient_funds", true, Fail},
		{429, "", false, Retry},
		{503, "maintenance", false, Retry},
		{409, "", true, Fail},
	}
	for _, tt := range tests {
		if got := ClassifyAnswer(tt.status, tt.code, tt.retryAfter, nil); got != tt.want {
			t.Fatalf("ClassifyAnswer(%d, %q, %v) = %v, want %v", tt.status, tt.code, tt.retryAfter, got, tt.want)
		}
	}
}

func TestClassifyProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		status := rapid.IntRange(0, 999).Draw(t, "status")
		code := rapid.OneOf(rapid.SampledFrom(allCodes), rapid.String()).Draw(t, "code")
		got := Classify(status, code, nil)
		if want := wantDecision(status, code); got != want {
			t.Fatalf("Classify(%d, %q, nil) = %v, want %v", status, code, got, want)
		}
		if (got == Retry) != (slices.Contains([]int{408, 425, 429, 500, 502, 503, 504}, status) ||
			(status == 409 && (code == CodeRequestInProgress || code == CodeOutcomePending))) {
			t.Fatalf("Classify(%d, %q): retryable = %t outside the allowed set", status, code, got == Retry)
		}
	})
}

func TestClassifyTransportErrors(t *testing.T) {
	t.Parallel()
	retryable := []error{
		io.EOF,
		io.ErrUnexpectedEOF,
		context.DeadlineExceeded,
		os.ErrDeadlineExceeded,
		&net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED},
		&url.Error{Op: "Post", URL: "http://x", Err: syscall.ECONNRESET},
		&url.Error{Op: "Post", URL: "http://x", Err: context.DeadlineExceeded},
		fmt.Errorf("read body: %w", io.ErrUnexpectedEOF),
	}
	rapid.Check(t, func(t *rapid.T) {
		err := rapid.SampledFrom(retryable).Draw(t, "err")
		status := rapid.IntRange(0, 599).Draw(t, "status")
		if d := Classify(status, "", err); d != Retry {
			t.Fatalf("Classify(%d, %v) = %v, want retry", status, err, d)
		}
		canceled := &url.Error{Op: "Post", URL: "http://x", Err: context.Canceled}
		if d := Classify(status, "", canceled); d != Fail {
			t.Fatalf("Classify(%d, %v) = %v, want fail", status, canceled, d)
		}
	})
	if !errors.Is(&url.Error{Err: context.Canceled}, context.Canceled) {
		t.Fatal("url.Error does not unwrap")
	}
}
