package framework

import (
	"errors"
	"fmt"
	"net/http"
	"time"
)

// Code is the stable, machine-readable problem code a client branches on.
// It is carried in the "code" member of every problem body.
type Code string

// The problem codes of the retrysafe wire contract.
const (
	CodeMalformedJSON         Code = "malformed_json"
	CodeValidationFailed      Code = "validation_failed"
	CodeInvalidResourceID     Code = "invalid_resource_id"
	CodeIdempotencyKeyMissing Code = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid Code = "idempotency_key_invalid"
	CodeUnauthenticated       Code = "unauthenticated"
	CodeNotFound              Code = "not_found"
	CodeRequestInProgress     Code = "request_in_progress"
	CodeOutcomePending        Code = "outcome_pending"
	CodeResourceLocked        Code = "resource_locked"
	CodeCurrencyMismatch      Code = "currency_mismatch"
	CodeResourceDeleted       Code = "resource_deleted"
	CodePreconditionFailed    Code = "precondition_failed"
	CodePayloadTooLarge       Code = "payload_too_large"
	CodeIdempotencyKeyReuse   Code = "idempotency_key_reuse"
	CodeCardDeclined          Code = "card_declined"
	CodeUnavailable           Code = "unavailable"
	CodeMethodNotAllowed      Code = "method_not_allowed"
	CodeInternal              Code = "internal"
)

// codeInfo is the one table that maps a problem code to its HTTP status and
// title. Every error a client sees goes through it.
var codeInfo = map[Code]struct {
	status int
	title  string
}{
	CodeMalformedJSON:         {http.StatusBadRequest, "Malformed JSON"},
	CodeValidationFailed:      {http.StatusBadRequest, "Validation failed"},
	CodeInvalidResourceID:     {http.StatusBadRequest, "Invalid resource ID"},
	CodeIdempotencyKeyMissing: {http.StatusBadRequest, "Idempotency key missing"},
	CodeIdempotencyKeyInvalid: {http.StatusBadRequest, "Idempotency key invalid"},
	CodeUnauthenticated:       {http.StatusUnauthorized, "Unauthenticated"},
	CodeCardDeclined:          {http.StatusPaymentRequired, "Card declined"},
	CodeNotFound:              {http.StatusNotFound, "Not found"},
	CodeRequestInProgress:     {http.StatusConflict, "Request in progress"},
	CodeOutcomePending:        {http.StatusConflict, "Outcome pending"},
	CodeResourceLocked:        {http.StatusConflict, "Resource locked"},
	CodeCurrencyMismatch:      {http.StatusConflict, "Currency mismatch"},
	CodeResourceDeleted:       {http.StatusGone, "Resource deleted"},
	CodePreconditionFailed:    {http.StatusPreconditionFailed, "Precondition failed"},
	CodePayloadTooLarge:       {http.StatusRequestEntityTooLarge, "Payload too large"},
	CodeIdempotencyKeyReuse:   {http.StatusUnprocessableEntity, "Idempotency key reuse"},
	CodeUnavailable:           {http.StatusServiceUnavailable, "Service unavailable"},
	CodeMethodNotAllowed:      {http.StatusMethodNotAllowed, "Method not allowed"},
	CodeInternal:              {http.StatusInternalServerError, "Internal server error"},
}

// Status returns the HTTP status of a problem code, 500 for an unknown one.
func (c Code) Status() int {
	if info, ok := codeInfo[c]; ok {
		return info.status
	}
	return http.StatusInternalServerError
}

// Title returns the short human-readable summary of a problem code.
func (c Code) Title() string {
	if info, ok := codeInfo[c]; ok {
		return info.title
	}
	return codeInfo[CodeInternal].title
}

// FieldError is one entry of the "errors" extension of a validation problem.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Error is an error with a problem code: the framework renders it as an RFC
// 9457 problem. Two *Error values match under [errors.Is] when their codes are
// equal, so the sentinels below work with wrapped, detailed copies.
type Error struct {
	Code   Code
	Detail string
	// Fields lists per-field validation failures (validation_failed only).
	Fields []FieldError
	// RetryAfter, when positive, is sent as a Retry-After header.
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
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Detail: fmt.Sprintf(format, args...)}
}

// Sentinels, one per code, for errors.Is comparisons.
var (
	ErrMalformedJSON         = &Error{Code: CodeMalformedJSON}
	ErrValidationFailed      = &Error{Code: CodeValidationFailed}
	ErrInvalidResourceID     = &Error{Code: CodeInvalidResourceID}
	ErrIdempotencyKeyMissing = &Error{Code: CodeIdempotencyKeyMissing}
	ErrIdempotencyKeyInvalid = &Error{Code: CodeIdempotencyKeyInvalid}
	ErrUnauthenticated       = &Error{Code: CodeUnauthenticated}
	ErrNotFound              = &Error{Code: CodeNotFound}
	ErrRequestInProgress     = &Error{Code: CodeRequestInProgress}
	ErrOutcomePending        = &Error{Code: CodeOutcomePending}
	ErrResourceLocked        = &Error{Code: CodeResourceLocked}
	ErrCurrencyMismatch      = &Error{Code: CodeCurrencyMismatch}
	ErrResourceDeleted       = &Error{Code: CodeResourceDeleted}
	ErrPreconditionFailed    = &Error{Code: CodePreconditionFailed}
	ErrPayloadTooLarge       = &Error{Code: CodePayloadTooLarge}
	ErrIdempotencyKeyReuse   = &Error{Code: CodeIdempotencyKeyReuse}
	ErrUnavailable           = &Error{Code: CodeUnavailable}
)

// AsError returns the *Error in err's chain, if any.
func AsError(err error) (*Error, bool) {
	var e *Error
	if errors.As(err, &e) {
		return e, true
	}
	return nil, false
}
