package wire

import (
	"fmt"
	"net/http"
)

// Code is the stable, machine-readable problem code a client branches on,
// carried in the "code" member of every problem body.
type Code string

// The generic problem codes, owned by the framework. A resource adds its
// own business codes on the server (status, title, retryable); a client
// treats a code it does not know by its HTTP status and Retry-After.
const (
	CodeMalformedJSON         Code = "malformed_json"
	CodeValidationFailed      Code = "validation_failed"
	CodeInvalidResourceID     Code = "invalid_resource_id"
	CodeIdempotencyKeyMissing Code = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid Code = "idempotency_key_invalid"
	CodeUnauthenticated       Code = "unauthenticated"
	CodeNotFound              Code = "not_found"
	CodeMethodNotAllowed      Code = "method_not_allowed"
	CodeRequestInProgress     Code = "request_in_progress"
	CodeOutcomePending        Code = "outcome_pending"
	CodeResourceLocked        Code = "resource_locked"
	CodeResourceDeleted       Code = "resource_deleted"
	CodePreconditionFailed    Code = "precondition_failed"
	CodePreconditionRequired  Code = "precondition_required"
	CodePayloadTooLarge       Code = "payload_too_large"
	CodeUnsupportedMediaType  Code = "unsupported_media_type"
	CodeIdempotencyKeyReuse   Code = "idempotency_key_reuse"
	CodeTooManyRequests       Code = "too_many_requests"
	CodeInternal              Code = "internal"
	CodeUnavailable           Code = "unavailable"
)

// CodeInfo describes a problem code: the HTTP status it is answered with,
// its title, and whether a retry with the same ID or key may succeed.
type CodeInfo struct {
	Code   Code
	Status int
	Title  string
	// Retryable reports that the answer is not final: the client should
	// send the same request again, with the same ID or key, after the
	// Retry-After the answer carries. Exactly the retryable answers carry
	// Retry-After. A final answer (a rejection, a key reused with another
	// body) is not retryable: a new attempt needs a new ID or key, or a
	// fixed request.
	Retryable bool
}

// generic is the table of the generic codes; read only.
var generic = [...]CodeInfo{
	{CodeMalformedJSON, http.StatusBadRequest, "Malformed JSON", false},
	{CodeValidationFailed, http.StatusBadRequest, "Validation failed", false},
	{CodeInvalidResourceID, http.StatusBadRequest, "Invalid resource ID", false},
	{CodeIdempotencyKeyMissing, http.StatusBadRequest, "Idempotency key missing", false},
	{CodeIdempotencyKeyInvalid, http.StatusBadRequest, "Idempotency key invalid", false},
	// Retrying the same request is pointless; with fixed credentials it
	// may succeed, which is the client's business, not a Retry-After.
	{CodeUnauthenticated, http.StatusUnauthorized, "Unauthenticated", false},
	{CodeNotFound, http.StatusNotFound, "Not found", false},
	{CodeMethodNotAllowed, http.StatusMethodNotAllowed, "Method not allowed", false},
	{CodeRequestInProgress, http.StatusConflict, "Request in progress", true},
	{CodeOutcomePending, http.StatusConflict, "Outcome pending", true},
	{CodeResourceLocked, http.StatusConflict, "Resource locked", false},
	{CodeResourceDeleted, http.StatusGone, "Resource deleted", false},
	{CodePreconditionFailed, http.StatusPreconditionFailed, "Precondition failed", false},
	// A PATCH format whose operations do not converge on retry (JSON
	// Patch) sent without If-Match: the same request fails again.
	{CodePreconditionRequired, http.StatusPreconditionRequired, "Precondition required", false},
	{CodePayloadTooLarge, http.StatusRequestEntityTooLarge, "Payload too large", false},
	{CodeUnsupportedMediaType, http.StatusUnsupportedMediaType, "Unsupported media type", false},
	{CodeIdempotencyKeyReuse, http.StatusUnprocessableEntity, "Idempotency key reuse", false},
	{CodeTooManyRequests, http.StatusTooManyRequests, "Too many requests", true},
	// A server bug: a client may retry it by its own policy (the key was
	// released, or the outcome is reconciled), but the server does not
	// promise that a retry helps and sends no Retry-After.
	{CodeInternal, http.StatusInternalServerError, "Internal server error", false},
	{CodeUnavailable, http.StatusServiceUnavailable, "Service unavailable", true},
}

// Generic returns the generic codes, in a fresh slice.
func Generic() []CodeInfo {
	return append([]CodeInfo(nil), generic[:]...)
}

// LookupGeneric returns the description of a generic code.
func LookupGeneric(c Code) (CodeInfo, bool) {
	for _, info := range generic {
		if info.Code == c {
			return info, true
		}
	}
	return CodeInfo{}, false
}

// Validate reports whether info can be a code of the contract: a name of
// [a-z0-9_] (1 to 64 characters), a 4xx or 5xx status and a title. A
// retryable code must be a 409, 425, 429 or 5xx answer; a code of a status
// that clients retry by status alone (429, 503) must be retryable.
func (info CodeInfo) Validate() error {
	name := string(info.Code)
	if name == "" || len(name) > 64 {
		return fmt.Errorf("wire: code %q must have 1 to 64 characters", name)
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; !('a' <= c && c <= 'z' || '0' <= c && c <= '9' || c == '_') {
			return fmt.Errorf("wire: code %q may hold only a-z 0-9 _", name)
		}
	}
	if info.Status < 400 || info.Status > 599 {
		return fmt.Errorf("wire: code %q: status %d is not a 4xx or 5xx", name, info.Status)
	}
	if info.Title == "" {
		return fmt.Errorf("wire: code %q has no title", name)
	}
	switch info.Status {
	case http.StatusConflict, http.StatusTooEarly:
	case http.StatusTooManyRequests, http.StatusServiceUnavailable:
		if !info.Retryable {
			return fmt.Errorf("wire: code %q: a %d answer is always retryable", name, info.Status)
		}
	default:
		if info.Retryable && info.Status < 500 {
			return fmt.Errorf("wire: code %q: a %d answer cannot be retryable", name, info.Status)
		}
	}
	return nil
}
