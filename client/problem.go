package client

import (
	"net/http"

	"github.com/retrysafe/retrysafe/wire"
)

// Problem is an RFC 9457 problem details document as the retrysafe API
// writes it (an alias of [wire.Problem]): the standard members, the stable
// machine-readable Code, and Extensions holding every member of the body.
type Problem = wire.Problem

// The generic problem codes of the wire contract, as strings (see [wire]
// for their statuses and retryability). A service adds business codes of
// its own (a payment's "card_declined"); the client handles a code it does
// not know by the answer's HTTP status and Retry-After (see
// [ClassifyAnswer]).
const (
	CodeMalformedJSON         = string(wire.CodeMalformedJSON)
	CodeValidationFailed      = string(wire.CodeValidationFailed)
	CodeInvalidResourceID     = string(wire.CodeInvalidResourceID)
	CodeIdempotencyKeyMissing = string(wire.CodeIdempotencyKeyMissing)
	CodeIdempotencyKeyInvalid = string(wire.CodeIdempotencyKeyInvalid)
	CodeUnauthenticated       = string(wire.CodeUnauthenticated)
	CodeNotFound              = string(wire.CodeNotFound)
	CodeMethodNotAllowed      = string(wire.CodeMethodNotAllowed)
	CodeRequestInProgress     = string(wire.CodeRequestInProgress)
	CodeOutcomePending        = string(wire.CodeOutcomePending)
	CodeResourceLocked        = string(wire.CodeResourceLocked)
	CodeResourceDeleted       = string(wire.CodeResourceDeleted)
	CodePreconditionFailed    = string(wire.CodePreconditionFailed)
	CodePayloadTooLarge       = string(wire.CodePayloadTooLarge)
	CodeUnsupportedMediaType  = string(wire.CodeUnsupportedMediaType)
	CodeIdempotencyKeyReuse   = string(wire.CodeIdempotencyKeyReuse)
	CodeTooManyRequests       = string(wire.CodeTooManyRequests)
	CodeInternal              = string(wire.CodeInternal)
	CodeUnavailable           = string(wire.CodeUnavailable)
)

// parseProblem decodes body when the response declares a JSON media type
// and the body is a JSON object; otherwise it returns nil.
func parseProblem(h http.Header, body []byte) *Problem {
	return wire.ParseProblem(h.Get(wire.HeaderContentType), body)
}
