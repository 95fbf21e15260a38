package failpoint

import (
	"context"
	"errors"
	"fmt"
	"net/http"
)

// Func is called at every point an attempt reaches, with the attempt's
// operation and the point; it may pause there, and an error abandons the
// attempt there as a crash would.
type Func func(ctx context.Context, operation, point string) error

// The POST fallback's own points.
const (
	// AfterClaim is reached by a phased attempt right after the
	// transaction that claimed its key, or took its record over,
	// committed. After a claim or takeover of its own, RunFunc or
	// ReconcileFunc has not started: the record is in progress at its
	// recovery point and nothing else has happened. With
	// ClaimInFirstPhase, the claim commits in the first phase's
	// transaction, so the point follows that commit: the phase's writes
	// (and, with Run.Complete, the outcome) are committed too, and the
	// phase's AfterPhase comes next; when RunFunc renews or returns before
	// any phase, the claim is a transaction of its own and the point
	// follows it. The recovery worker's takeovers do not reach it.
	AfterClaim = "after_claim"
	// AfterPhase prefixes the point reached right after a phase's
	// transaction committed: "after_phase:" + the recovery point. After
	// Run.Complete that transaction stored the outcome too: an attempt
	// that ends there leaves the record completed and its client without
	// an answer, a lost response.
	AfterPhase = "after_phase:"
	// BeforeComplete is reached by a phased attempt right before the
	// transaction that stores its outcome. After RunFunc or ReconcileFunc
	// returned a response or a stored rejection, that is the completion:
	// every phase is committed, the outcome is not. With Run.Complete, it
	// is the last phase's transaction, which stores the outcome with the
	// phase's writes: the point comes before it, and an attempt that ends
	// there leaves the record at the previous recovery point (with
	// ClaimInFirstPhase and no phase before, nothing at all).
	BeforeComplete = "before_complete"
)

// ErrAbandoned is returned (wrapped) by [Reach] when the Func fails the
// point. The attempt stops as a crashed process would: its record is left
// exactly as its last committed transaction left it (in progress with
// its lease running, for a retry or the recovery worker to find;
// completed after Run.Complete), and the client gets a 500. An operation
// that reaches a point of its own returns the error as it is.
var ErrAbandoned = errors.New("the attempt was abandoned at a fail point")

// key is the context key of the Func.
type key struct{}

// With returns ctx carrying fn, which runs after the Func ctx carries
// already, if any.
func With(ctx context.Context, fn Func) context.Context {
	if before, ok := ctx.Value(key{}).(Func); ok {
		after := fn
		fn = func(ctx context.Context, operation, point string) error {
			if err := before(ctx, operation, point); err != nil {
				return err
			}
			return after(ctx, operation, point)
		}
	}
	return context.WithValue(ctx, key{}, fn)
}

// Reach calls the Func of ctx at point of operation: nil when ctx has none
// or it lets the attempt pass, an error wrapping [ErrAbandoned] when it
// fails the point.
func Reach(ctx context.Context, operation, point string) error {
	fn, ok := ctx.Value(key{}).(Func)
	if !ok {
		return nil
	}
	if err := fn(ctx, operation, point); err != nil {
		return fmt.Errorf("%w: %s: %w", ErrAbandoned, point, err)
	}
	return nil
}

// Handler serves h with fn in the context of every request ([With]).
func Handler(h http.Handler, fn Func) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.ServeHTTP(w, r.WithContext(With(r.Context(), fn)))
	})
}
