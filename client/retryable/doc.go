// Package retryable is a ready retry policy for
// github.com/hashicorp/go-retryablehttp that follows the retrysafe wire
// contract, for callers who already use that library instead of [client].
//
// Install it on a client with [Apply] (or build one with [NewClient]):
//
//	rc := retryable.NewClient()
//	req, _ := retryablehttp.NewRequestWithContext(ctx, http.MethodPost, url, body)
//	req.Header.Set("Idempotency-Key", key) // made once per logical operation
//	resp, err := rc.Do(req)
//
// go-retryablehttp re-sends the same request, headers included, so every
// attempt carries the same Idempotency-Key (or the same PUT URL and ID),
// and the server applies the operation at most once.
//
// [CheckRetry] retries exactly what [client.Classify] retries: a transport
// error after which the request may or may not have been processed, 409
// request_in_progress and 409 outcome_pending, 429, 503, and the gateway
// answers 408, 425, 500, 502 and 504. Every other answer is final and is
// returned at once with its body unread, notably a final 409
// (resource_locked, currency_mismatch), 412 and 422: the caller decodes
// the problem and branches on its code. To tell a retryable 409 from a
// final one, CheckRetry reads the 409's problem body and puts it back, so
// the caller still gets it whole.
//
// [Backoff] honours Retry-After (delta-seconds or an HTTP-date) on any
// retried answer, and otherwise waits exponentially with full jitter
// between RetryWaitMin and RetryWaitMax.
//
// [ErrorHandler] keeps the last answer when the retries run out: the caller
// gets the last 409 or 503 with its problem body instead of
// go-retryablehttp's "giving up" error, whose default handler drains and
// closes the body. When the last attempt got no answer at all it returns an
// error wrapping [ErrOutcomeUnknown]: retry later with the same key, never
// with a new one.
package retryable
