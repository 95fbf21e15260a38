package client

import (
	"context"
	"errors"
	"net/http"
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

// Classify is the client's retry decision table, the only place where it is
// written down. status is the HTTP status of the response (0 when there was
// none), code its problem code ("" when none) and err the transport error
// of the attempt (nil when a response arrived).
//
//   - a transport error (connection refused or reset, response lost, a
//     per-attempt timeout): Retry; [context.Canceled]: Fail, the caller
//     gave up.
//   - 2xx: Done.
//   - 408, 425, 429, 500, 502, 503, 504: Retry.
//   - 409 with code request_in_progress or outcome_pending: Retry.
//   - 401: Refresh.
//   - anything else, notably 400, 402, 404, 409 resource_locked or
//     currency_mismatch, 410, 412, 413, 422, other 5xx and 1xx/3xx: Fail.
func Classify(status int, code string, err error) Decision {
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
	case status == http.StatusConflict:
		if code == CodeRequestInProgress || code == CodeOutcomePending {
			return Retry
		}
		return Fail
	}
	switch status {
	case http.StatusRequestTimeout, http.StatusTooEarly, http.StatusTooManyRequests,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return Retry
	}
	return Fail
}

// mayHaveTakenEffect reports whether an attempt that ended this way may have
// changed state on the server without the client learning the result.
func mayHaveTakenEffect(status int, code string, err error) bool {
	switch {
	case err != nil, status >= 500:
		return true
	case status == http.StatusConflict:
		return code == CodeRequestInProgress || code == CodeOutcomePending
	}
	return false
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
