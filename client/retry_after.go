package client

import (
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/wire"
)

// RetryAfter reads the Retry-After header of an answer, delta-seconds or an
// HTTP-date, as a wait from now (a date in the past is a zero wait). ok is
// false when the header is absent or unreadable.
func RetryAfter(h http.Header, now time.Time) (wait time.Duration, ok bool) {
	return parseRetryAfter(h.Get(wire.HeaderRetryAfter), now)
}

// ParseProblem decodes an answer's body as an RFC 9457 problem when its
// Content-Type is application/problem+json (or JSON with problem members);
// otherwise it returns nil.
func ParseProblem(h http.Header, body []byte) *Problem { return parseProblem(h, body) }
