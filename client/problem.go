package client

import (
	"encoding/json"
	"mime"
	"net/http"
)

// Problem is an RFC 9457 problem details document as the retrysafe API
// writes it: the standard members plus the stable machine-readable Code.
type Problem struct {
	Type   string `json:"type,omitempty"`
	Title  string `json:"title,omitempty"`
	Status int    `json:"status,omitempty"`
	Detail string `json:"detail,omitempty"`
	Code   string `json:"code,omitempty"`

	// Extensions holds every member of the body, standard ones included
	// (for example "errors" on validation_failed).
	Extensions map[string]json.RawMessage `json:"-"`
}

// Problem codes of the retrysafe wire contract.
const (
	CodeMalformedJSON         = "malformed_json"
	CodeValidationFailed      = "validation_failed"
	CodeInvalidResourceID     = "invalid_resource_id"
	CodeIdempotencyKeyMissing = "idempotency_key_missing"
	CodeIdempotencyKeyInvalid = "idempotency_key_invalid"
	CodeUnauthenticated       = "unauthenticated"
	CodeNotFound              = "not_found"
	CodeRequestInProgress     = "request_in_progress"
	CodeOutcomePending        = "outcome_pending"
	CodeResourceLocked        = "resource_locked"
	CodeCurrencyMismatch      = "currency_mismatch"
	CodeResourceDeleted       = "resource_deleted"
	CodePreconditionFailed    = "precondition_failed"
	CodePayloadTooLarge       = "payload_too_large"
	CodeIdempotencyKeyReuse   = "idempotency_key_reuse"
	CodeCardDeclined          = "card_declined"
	CodeUnavailable           = "unavailable"
)

// parseProblem decodes body when the response declares a JSON media type
// and the body is a JSON object; otherwise it returns nil.
func parseProblem(h http.Header, body []byte) *Problem {
	mt, _, err := mime.ParseMediaType(h.Get("Content-Type"))
	if err != nil || (mt != "application/problem+json" && mt != "application/json") {
		return nil
	}
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil {
		return nil
	}
	if err := json.Unmarshal(body, &p.Extensions); err != nil {
		return nil
	}
	if mt == "application/json" && p.Code == "" && p.Title == "" && p.Type == "" {
		return nil
	}
	return &p
}
