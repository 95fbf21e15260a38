package client

import (
	"context"
	"errors"
	"net/http"

	"github.com/retrysafe/retrysafe/wire"
)

// Decision is what the client does with the result of one attempt.
type Decision int

const (
	// Done: the server answered 2xx; the operation succeeded (freshly or as
	// a replay).
	Done Decision = iota + 1

	// Retry: the outcome is unknown or the server asked to come back later;
	// send the same request again with the same ID or key after a backoff
	// that honours Retry-After.
	Retry

	// Refresh: 401; call [Config.RefreshTokenFunc] and send again at once
	// with the same ID or key, at most once per refresh.
	Refresh

	// Fail: a definitive answer; never retried.
	Fail
)

// String returns the decision's name.
func (d Decision) String() string {
	switch d {
	case Done:
		return "done"
	case Retry:
		return "retry"
	case Refresh:
		return "refresh"
	case Fail:
		return "fail"
	default:
		return "unknown"
	}
}

// Classify is [ClassifyAnswer] for an answer without Retry-After.
func Classify(status int, code string, err error) Decision {
	return ClassifyAnswer(status, code, false, err)
}

// ClassifyAnswer is the client's retry decision table, the only place where
// it is written down. status is the HTTP status of the response (0 when
// there was none), code its problem code ("" when none), retryAfter whether
// it carried Retry-After, and err the transport error of the attempt (nil
// when a response arrived).
//
//   - a transport error (connection refused or reset, response lost, a
//     per-attempt timeout): Retry; [context.Canceled]: Fail, the caller
//     gave up.
//   - 2xx: Done.
//   - 401: Refresh.
//   - a code of the contract ([wire.LookupGeneric]) that is retryable at
//     its status (409 request_in_progress or outcome_pending, 429, 503):
//     Retry.
//   - 408, 425, 429, 500, 502, 503, 504: Retry.
//   - 409 with a code the contract does not define (a service's own) and
//     Retry-After: Retry. The server sends Retry-After on exactly the
//     answers that may be retried with the same ID or key.
//   - anything else, notably 400, 402, 404, 409 resource_locked or a
//     service's final 409 (no Retry-After), 410, 412, 413, 415, 422, other
//     5xx and 1xx/3xx: Fail.
func ClassifyAnswer(status int, code string, retryAfter bool, err error) Decision {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return Fail
		}
		return Retry
	}
	switch {
	case status >= 200 && status <= 299:
		return Done
	case status == http.StatusUnauthorized:
		return Refresh
	}
	info, known := wire.LookupGeneric(wire.Code(code))
	if known && info.Retryable && info.Status == status {
		return Retry
	}
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Retry
	case http.StatusConflict:
		if !known && code != "" && retryAfter {
			return Retry
		}
	}
	return Fail
}

// mayHaveTakenEffect reports whether an attempt that ended this way, and is
// to be retried, may have changed state on the server without the client
// learning the result: a lost answer, a 5xx, or a 409 saying the key is
// still being worked on.
func mayHaveTakenEffect(status int, err error) bool {
	return err != nil || status >= 500 || status == http.StatusConflict
}

// isDefinitive reports whether a non-retryable answer settles the outcome
// for this ID or key on its own. Authentication runs before any replay, so
// 401/403/407 say nothing about earlier attempts.
func isDefinitive(status int) bool {
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusProxyAuthRequired:
		return false
	}
	return status >= 400 && status <= 499
}
