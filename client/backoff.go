package client

import (
	"math"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// backoff computes the wait before a retry: exponential with full jitter,
// raised to the server's Retry-After, refused when it would not fit in the
// remaining budget.
type backoff struct {
	base time.Duration
	max  time.Duration
	rand func() float64
}

// ceiling returns min(max, base*2^retry) without overflowing.
func (b backoff) ceiling(retry int) time.Duration {
	c := b.base
	for range retry {
		if c > b.max/2 { // 2c > max; below it, 2c cannot overflow
			return b.max
		}
		c *= 2
	}
	return min(c, b.max)
}

// delay returns the wait before retry number retry (0 for the first retry).
// Without a Retry-After it is uniform in [0, min(max, base*2^retry)]; with
// one it is at least retryAfter. ok is false when the wait would not end
// before budget runs out: the caller must stop instead of sleeping.
func (b backoff) delay(retry int, retryAfter time.Duration, hasRetryAfter bool, budget time.Duration) (d time.Duration, ok bool) {
	ceil := b.ceiling(retry)
	r := b.rand()
	if r < 0 || r > 1 || math.IsNaN(r) {
		r = 0
	}
	d = time.Duration(float64(ceil) * r)
	d = min(max(d, 0), ceil)
	if hasRetryAfter && retryAfter > d {
		d = retryAfter
	}
	if d >= budget {
		return 0, false
	}
	return d, true
}

// parseRetryAfter reads a Retry-After value: delta-seconds or an HTTP-date,
// relative to now. A date in the past is a zero wait.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if secs, err := strconv.ParseUint(v, 10, 63); err == nil {
		const maxSecs = uint64(1<<63-1) / uint64(time.Second)
		return time.Duration(min(secs, maxSecs)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}
