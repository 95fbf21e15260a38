package failpoint

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
)

// TestReach: without a Func every point passes; a Func sees the operation
// and the point, a second one runs after the first, and a failure comes
// back wrapping ErrAbandoned and the Func's error.
func TestReach(t *testing.T) {
	t.Parallel()
	if err := Reach(context.Background(), "op", AfterClaim); err != nil {
		t.Fatalf("Reach without a Func = %v", err)
	}
	var seen []string
	crash := errors.New("kill -9")
	ctx := With(context.Background(), func(_ context.Context, op, point string) error {
		seen = append(seen, "first "+op+" "+point)
		return nil
	})
	ctx = With(ctx, func(_ context.Context, op, point string) error {
		seen = append(seen, "second "+op+" "+point)
		if point == BeforeComplete {
			return crash
		}
		return nil
	})
	if err := Reach(ctx, "op", AfterPhase+"p1"); err != nil {
		t.Fatalf("Reach = %v", err)
	}
	err := Reach(ctx, "op", BeforeComplete)
	if !errors.Is(err, ErrAbandoned) || !errors.Is(err, crash) {
		t.Fatalf("Reach of a failed point = %v, want ErrAbandoned and the Func's error", err)
	}
	want := []string{"first op after_phase:p1", "second op after_phase:p1", "first op before_complete", "second op before_complete"}
	if !slices.Equal(seen, want) {
		t.Fatalf("calls %q, want %q", seen, want)
	}
}

// TestHandler: every request served through Handler carries the Func.
func TestHandler(t *testing.T) {
	t.Parallel()
	var reached []string
	h := Handler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if err := Reach(r.Context(), "op", AfterClaim); err != nil {
			t.Error(err)
		}
	}), func(_ context.Context, _, point string) error { reached = append(reached, point); return nil })
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/", nil))
	if !slices.Equal(reached, []string{AfterClaim}) {
		t.Fatalf("reached %q", reached)
	}
}
