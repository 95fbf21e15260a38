package framework

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/wire"
)

// ErrCodeConflict is returned (wrapped) by [Engine.RegisterCodes] and
// [Codes.Register] when a code is already registered with another status,
// title or retryability, and ErrCodeUnregistered by declarations (such as
// postkeys.Register) that name a code nobody registered.
var (
	ErrCodeConflict     = errors.New("framework: problem code registered twice with different meanings")
	ErrCodeUnregistered = errors.New("framework: problem code is not registered")
)

// ErrRequestDeadline is the cause ([context.Cause]) of a request context
// whose deadline (server.Deadline, and the contexts server.Detach derives
// from it) expired, so that an error built from it says which deadline ran out.
// errors.Is(ErrRequestDeadline, context.DeadlineExceeded) holds.
var ErrRequestDeadline error = requestDeadline{}

type requestDeadline struct{}

func (requestDeadline) Error() string        { return "request deadline exceeded" }
func (requestDeadline) Is(target error) bool { return target == context.DeadlineExceeded }

// Codes is the registry of problem codes an [Engine] answers with: the
// generic codes of [wire] plus the business codes its resources register
// when they are built. A nil *Codes knows the generic codes only.
// Registration happens at start-up; lookups are safe while serving.
type Codes struct {
	mu    sync.RWMutex
	codes map[wire.Code]wire.CodeInfo
}

// NewCodes returns a registry of the generic codes.
func NewCodes() *Codes {
	c := &Codes{codes: map[wire.Code]wire.CodeInfo{}}
	for _, info := range wire.Generic() {
		c.codes[info.Code] = info
	}
	return c
}

// Register adds business codes. Registering a code again with the same
// description is a no-op (two instances of one resource on an engine); a
// different description, or one [wire.CodeInfo.Validate] refuses, is an
// error and registers none of infos.
func (c *Codes) Register(infos ...wire.CodeInfo) error {
	if c == nil {
		return errors.New("framework: Register on a nil *Codes")
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, info := range infos {
		if err := info.Validate(); err != nil {
			return fmt.Errorf("framework: %w", err)
		}
		if known, ok := c.codes[info.Code]; ok && known != info {
			return fmt.Errorf("%w: %q is %d %q (retryable %v), not %d %q (retryable %v)", ErrCodeConflict,
				info.Code, known.Status, known.Title, known.Retryable, info.Status, info.Title, info.Retryable)
		}
		for _, other := range infos[:i] {
			if other.Code == info.Code && other != info {
				return fmt.Errorf("%w: %q is given twice", ErrCodeConflict, info.Code)
			}
		}
	}
	for _, info := range infos {
		c.codes[info.Code] = info
	}
	return nil
}

// Lookup returns the description of a registered code.
func (c *Codes) Lookup(code wire.Code) (wire.CodeInfo, bool) {
	if c == nil {
		return wire.LookupGeneric(code)
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	info, ok := c.codes[code]
	return info, ok
}

// All returns every registered code, sorted by name.
func (c *Codes) All() []wire.CodeInfo {
	if c == nil {
		return wire.Generic()
	}
	c.mu.RLock()
	out := make([]wire.CodeInfo, 0, len(c.codes))
	for _, info := range c.codes {
		out = append(out, info)
	}
	c.mu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Code < out[j].Code })
	return out
}

// Codes returns the engine's code registry.
func (e *Engine) Codes() *Codes { return e.codes }

// RegisterCodes registers a resource's business codes (status, title,
// retryable) on the engine: call it when the resource is built, before
// declaring operations that answer them. A conflict with a code already
// registered fails, so a wrong wiring stops the process at start-up.
func (e *Engine) RegisterCodes(infos ...wire.CodeInfo) error { return e.codes.Register(infos...) }

// Error is an error with a problem code: the framework renders it as an RFC
// 9457 problem. Two *Error values match under [errors.Is] when their codes are
// equal, so the sentinels below work with wrapped, detailed copies.
type Error struct {
	Code   wire.Code
	Detail string
	// Fields lists per-field validation failures (validation_failed only).
	Fields []wire.FieldError
	// RetryAfter is the Retry-After of a retryable code; it defaults to 1s.
	// It is ignored for a code that is not retryable: a final answer never
	// carries Retry-After.
	RetryAfter time.Duration
	// Err is the underlying cause; it is logged, never sent to the client.
	Err error
}

func (e *Error) Error() string {
	msg := string(e.Code)
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *Error) Unwrap() error { return e.Err }

// Is reports whether target is an *Error with the same code.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Code == e.Code
}

// Errorf returns a problem error with the given code and a formatted detail.
func Errorf(code wire.Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Sentinels, one per generic code, for errors.Is comparisons.
var (
	ErrMalformedJSON         = &Error{Code: wire.CodeMalformedJSON}
	ErrValidationFailed      = &Error{Code: wire.CodeValidationFailed}
	ErrInvalidResourceID     = &Error{Code: wire.CodeInvalidResourceID}
	ErrIdempotencyKeyMissing = &Error{Code: wire.CodeIdempotencyKeyMissing}
	ErrIdempotencyKeyInvalid = &Error{Code: wire.CodeIdempotencyKeyInvalid}
	ErrUnauthenticated       = &Error{Code: wire.CodeUnauthenticated}
	ErrNotFound              = &Error{Code: wire.CodeNotFound}
	ErrMethodNotAllowed      = &Error{Code: wire.CodeMethodNotAllowed}
	ErrRequestInProgress     = &Error{Code: wire.CodeRequestInProgress}
	ErrOutcomePending        = &Error{Code: wire.CodeOutcomePending}
	ErrResourceLocked        = &Error{Code: wire.CodeResourceLocked}
	ErrResourceDeleted       = &Error{Code: wire.CodeResourceDeleted}
	ErrPreconditionFailed    = &Error{Code: wire.CodePreconditionFailed}
	ErrPreconditionRequired  = &Error{Code: wire.CodePreconditionRequired}
	ErrPayloadTooLarge       = &Error{Code: wire.CodePayloadTooLarge}
	ErrUnsupportedMediaType  = &Error{Code: wire.CodeUnsupportedMediaType}
	ErrIdempotencyKeyReuse   = &Error{Code: wire.CodeIdempotencyKeyReuse}
	ErrTooManyRequests       = &Error{Code: wire.CodeTooManyRequests}
	ErrUnavailable           = &Error{Code: wire.CodeUnavailable}
)

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
