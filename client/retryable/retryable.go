package retryable

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/hashicorp/go-retryablehttp"

	"github.com/retrysafe/retrysafe/client"
)

// ErrOutcomeUnknown is wrapped by the error [ErrorHandler] returns when the
// last attempt got no answer: the operation may or may not have taken
// effect. Retry later with the same Idempotency-Key or resource ID.
var ErrOutcomeUnknown = errors.New("retryable: outcome unknown")

// maxPeek bounds the part of a 409 body that CheckRetry reads to find its
// problem code.
const maxPeek = 64 << 10

// Apply installs [CheckRetry], [Backoff] and [ErrorHandler] on c and returns
// it.
func Apply(c *retryablehttp.Client) *retryablehttp.Client {
	c.CheckRetry = CheckRetry
	c.Backoff = Backoff
	c.ErrorHandler = ErrorHandler
	return c
}

// NewClient returns a go-retryablehttp client with this package's policy,
// go-retryablehttp's defaults otherwise (4 retries, waits from 1 s to
// 30 s), and no logger (go-retryablehttp's default logs every attempt to
// stderr).
func NewClient() *retryablehttp.Client {
	c := retryablehttp.NewClient()
	c.Logger = nil
	return Apply(c)
}

// CheckRetry is a [retryablehttp.CheckRetry] that retries exactly the
// answers [client.Classify] retries (see the package documentation). It
// stops, with the context's error, once ctx is done. Transport errors that
// no retry can fix (a bad URL scheme, an untrusted certificate, too many
// redirects) are final, as in [retryablehttp.DefaultRetryPolicy].
func CheckRetry(ctx context.Context, resp *http.Response, err error) (bool, error) {
	if ctx.Err() != nil {
		return false, ctx.Err()
	}
	if err != nil {
		retry, _ := retryablehttp.DefaultRetryPolicy(ctx, nil, err)
		return retry, nil
	}
	code := ""
	if resp.StatusCode == http.StatusConflict {
		var ok bool
		if code, ok = peekCode(resp); !ok {
			// The body broke off: the answer is as good as lost, and a
			// retry with the same key is safe.
			return true, nil
		}
	}
	return client.Classify(resp.StatusCode, code, nil) == client.Retry, nil
}

// peekCode reads the problem code of resp and puts the bytes it read back
// in front of the rest of the body. ok is false when reading failed.
func peekCode(resp *http.Response) (code string, ok bool) {
	if resp.Body == nil {
		return "", true
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxPeek))
	rest := resp.Body
	resp.Body = struct {
		io.Reader
		io.Closer
	}{io.MultiReader(bytes.NewReader(data), rest), rest}
	if err != nil {
		return "", false
	}
	if p := client.ParseProblem(resp.Header, data); p != nil {
		return string(p.Code), true
	}
	return "", true
}

// Backoff is a [retryablehttp.Backoff]: the answer's Retry-After when it
// has one (delta-seconds or an HTTP-date, honoured even above max: bound
// the whole call with the request's context), else a wait drawn uniformly
// from [min, min·2^attempt] capped at max (full jitter).
func Backoff(min, max time.Duration, attempt int, resp *http.Response) time.Duration {
	return backoff(time.Now(), rand.Float64, min, max, attempt, resp)
}

func backoff(now time.Time, random func() float64, lo, hi time.Duration, attempt int, resp *http.Response) time.Duration {
	if resp != nil {
		if d, ok := client.RetryAfter(resp.Header, now); ok {
			return d
		}
	}
	ceil := lo
	for range attempt {
		if ceil > hi/2 {
			ceil = hi
			break
		}
		ceil *= 2
	}
	ceil = max(min(ceil, hi), lo)
	return lo + time.Duration(random()*float64(ceil-lo))
}

// ErrorHandler is a [retryablehttp.ErrorHandler] for when the retries run
// out (or ctx ends): with a last answer (a 409 request_in_progress, a 503,
// …) it returns that answer, body unread, and no error, so the caller sees
// its status, problem code and Retry-After; without one it returns an
// error wrapping both [ErrOutcomeUnknown] and the last transport error.
func ErrorHandler(resp *http.Response, err error, tries int) (*http.Response, error) {
	if resp != nil && (err == nil || (!errors.Is(err, context.Canceled) && !errors.Is(err, context.DeadlineExceeded))) {
		return resp, nil
	}
	if resp != nil {
		_ = resp.Body.Close()
	}
	return nil, fmt.Errorf("%w after %d attempt(s): retry later with the same key: %w", ErrOutcomeUnknown, tries, err)
}
