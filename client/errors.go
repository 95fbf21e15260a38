package client

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"
)

var (
	// ErrInvalidConfig is returned by [New] when a [Config] field is out of
	// range.
	ErrInvalidConfig = errors.New("client: invalid config")

	// ErrInvalidRequest is returned by [Client.Create] and [Client.Post] when
	// the request cannot be sent at all (a missing path, an explicit ID or
	// key that conflicts with the one already stored for the operation).
	// Nothing was sent.
	ErrInvalidRequest = errors.New("client: invalid request")

	// ErrInvalidKey is returned by [Client.Post] when an idempotency key is
	// empty, longer than 255 characters or uses a character outside
	// [A-Za-z0-9._:-], including one loaded from the [KeyStore]. Nothing
	// was sent.
	ErrInvalidKey = errors.New("client: invalid idempotency key")

	// ErrKeyNotFound is returned by [KeyStore.Load] when no key is stored
	// for the operation. Implementations must return it (possibly wrapped).
	ErrKeyNotFound = errors.New("client: no key stored for operation")

	// ErrRetriesExhausted is wrapped by the [*Error] that [Client.Create] and
	// [Client.Post] return when the last answer was retryable but the
	// attempt cap ([Config.MaxAttempts]) or the elapsed-time cap
	// ([Config.MaxElapsed]) was reached. Retry later with the same ID or key.
	ErrRetriesExhausted = errors.New("client: retries exhausted")

	// ErrKeyExpired is matched by the [*KeyExpiredError] that [Client.Post]
	// returns when the key stored for an operation is older than
	// [Config.ReplayWindow]. Nothing was sent.
	ErrKeyExpired = errors.New("client: stored key is older than the replay window")

	// ErrResponseTooLarge is wrapped by the [*Error] returned when a response
	// body exceeds [Config.MaxResponseBytes].
	ErrResponseTooLarge = errors.New("client: response body too large")
)

// KeyExpiredError is returned by [Client.Post] instead of sending a key
// that the server no longer remembers: it was saved in the [KeyStore] for
// Operation longer ago than the replay window (24 hours by default), after
// which the server treats it as new and would run the operation a second
// time. Find out whether the operation took effect (a GET of what it
// creates, the provider's records), act on that, then call
// [Client.Forget] before starting over with a new key.
type KeyExpiredError struct {
	Operation    string
	Key          string
	SavedAt      time.Time
	Age          time.Duration
	ReplayWindow time.Duration
}

// Error says which operation's key expired and what to do.
func (e *KeyExpiredError) Error() string {
	return fmt.Sprintf("client: the key of operation %q was saved %v ago, beyond the server's replay window (%v): "+
		"the server no longer remembers it and would run the operation again; find out whether it took effect, then Forget it",
		e.Operation, e.Age.Round(time.Second), e.ReplayWindow)
}

// Is matches [ErrKeyExpired].
func (e *KeyExpiredError) Is(target error) bool { return target == ErrKeyExpired }

// ProblemOf returns the problem of the last answer carried by err (an
// [*Error] in its chain), or nil and false.
func ProblemOf(err error) (*Problem, bool) {
	var e *Error
	if errors.As(err, &e) && e.Problem != nil {
		return e.Problem, true
	}
	return nil, false
}

// Error is the error returned by [Client.Create], [Client.Post] and the
// other calls once a
// request was attempted: the server's last answer (if any), how many
// attempts were made and whether the outcome of the logical operation is
// known. Use [errors.As] (or errors.AsType) to get it; errors.Is matches
// [ErrRetriesExhausted], [ErrResponseTooLarge], context errors and the last
// transport error through it.
type Error struct {
	// Method and URL of the request.
	Method, URL string

	// Status is the HTTP status of the last response, 0 when the last
	// attempt got no response (network error, timeout, cancellation).
	Status int

	// Code is the problem code of the last response ("idempotency_key_reuse",
	// "card_declined", …), empty when the body was not a problem document.
	Code string

	// Problem is the decoded RFC 9457 body of the last response, nil when it
	// was not one.
	Problem *Problem

	// Header and Body are the last response's headers and body, nil when
	// there was no response.
	Header http.Header
	Body   []byte

	// Attempts is the number of requests sent for the operation, the
	// transport's own re-sends included (see [Result.Attempts]).
	Attempts int

	// OutcomeKnown reports whether the caller knows what happened on the
	// server: true for a definitive answer (a 4xx such as 400, 402, 404,
	// 412 or 422 given for this ID or key, or an auth failure before any
	// attempt could have had an effect), false when an attempt may have
	// taken effect and no later answer settled it (network errors,
	// timeouts, 5xx, 409 outcome_pending or request_in_progress). When
	// false, retry later with the same ID or key: never with a new one.
	OutcomeKnown bool

	// ID is the resource ID used by [Client.Create]; Key is the idempotency
	// key used by [Client.Post].
	ID  string
	Key string

	// Err is the cause: [ErrRetriesExhausted] (joined with the last
	// transport error, if any), a transport error, a context error, the
	// error of [Config.RefreshTokenFunc], or nil for a plain non-retryable
	// answer.
	Err error
}

// Error formats the request, the last status and problem code, the attempt
// count and the cause.
func (e *Error) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "client: %s %s", e.Method, e.URL)
	if e.Status != 0 {
		fmt.Fprintf(&b, ": %d %s", e.Status, http.StatusText(e.Status))
	}
	if e.Code != "" {
		fmt.Fprintf(&b, " (%s)", e.Code)
	}
	if e.Problem != nil && e.Problem.Detail != "" {
		fmt.Fprintf(&b, ": %s", e.Problem.Detail)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	fmt.Fprintf(&b, " [attempts=%d outcome_known=%t]", e.Attempts, e.OutcomeKnown)
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// Detail returns the problem detail of the last response, or "".
func (e *Error) Detail() string {
	if e.Problem == nil {
		return ""
	}
	return e.Problem.Detail
}
