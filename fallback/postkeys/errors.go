package postkeys

import (
	"errors"
	"fmt"
)

var (
	// ErrFenced is returned by [Run.Phase], [Run.Complete], [Run.Renew] and
	// [Run.RenewFor] when the attempt no longer owns its record: its
	// fencing token is not the record's any more (a newer attempt took it
	// over, or it was released and claimed again, or completed) or its
	// lease ended on the database clock; or, for an operation with
	// [Operation.ClaimInFirstPhase], when the first phase found the key
	// held by another request. Nothing the failed phase wrote was
	// committed. A RunFunc or ReconcileFunc that gets it must stop and
	// return it; the adapter then answers with the other attempt's outcome.
	// [Resolve] returns it when another attempt (a retry, the recovery
	// worker, another operator) took the record over between the
	// resolution's read and its takeover: nothing was written.
	ErrFenced = errors.New("postkeys: the attempt was fenced off by a newer attempt")

	// ErrRecordNotFound is returned by [Resolve] when no record has the
	// key.
	ErrRecordNotFound = errors.New("postkeys: no such idempotency record")

	// ErrLeaseHeld is returned by [Resolve] when the record is in progress
	// and its lease is live on the database clock: an attempt is running,
	// and may still finish. Nothing was written; resolve after the lease.
	ErrLeaseHeld = errors.New("postkeys: a live attempt holds the record's lease")

	// ErrNotResolvable is returned by [Resolve] when the record is
	// completed: it has a final answer already.
	ErrNotResolvable = errors.New("postkeys: the record is completed, not unknown")

	// ErrInvalidResolution is returned (wrapped, with what is wrong) by
	// [Resolve] for a resolution it cannot store: no actor or reason, a
	// succeeded outcome without a reference or with a status outside 2xx
	// or a body that a request's would be refused for (not one JSON
	// value, duplicate keys, bad UTF-8, NUL), a failed outcome whose code
	// is not a registered, final rejection, a replay window shorter than
	// the lease.
	ErrInvalidResolution = errors.New("postkeys: invalid resolution")

	// ErrRunning is returned by [Adapter.Start] when the workers are already
	// running.
	ErrRunning = errors.New("postkeys: the workers are already running")
)

// serverError is an operation's [Response] with a 5xx status. It is never
// stored: it counts as the operation's error, so a local operation's
// transaction rolls back whole and a phased attempt releases its key
// before any phase, or leaves its record unknown after one. The request is
// answered with the response itself (its allow-listed headers and body)
// where an error would be answered, never replayed.
type serverError struct{ resp storedResponse }

func (e *serverError) Error() string {
	return fmt.Sprintf("postkeys: the operation answered %d, which is not stored", e.resp.status)
}
