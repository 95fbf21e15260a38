package client

import (
	"net/http"
	"testing"
	"time"

	"pgregory.net/rapid"
)

func TestBackoffProperty(t *testing.T) {
	t.Parallel()
	rapid.Check(t, func(t *rapid.T) {
		base := time.Duration(rapid.Int64Range(int64(time.Millisecond), int64(10*time.Second)).Draw(t, "base"))
		maxDelay := base + time.Duration(rapid.Int64Range(0, int64(time.Hour)).Draw(t, "extra"))
		r := rapid.Float64Range(0, 1).Draw(t, "rand")
		b := backoff{base: base, max: maxDelay, rand: func() float64 { return r }}
		retry := rapid.IntRange(0, 200).Draw(t, "retry")
		hasRA := rapid.Bool().Draw(t, "hasRetryAfter")
		ra := time.Duration(rapid.Int64Range(0, int64(2*time.Hour)).Draw(t, "retryAfter"))
		budget := time.Duration(rapid.Int64Range(-int64(time.Second), int64(3*time.Hour)).Draw(t, "budget"))

		// The ceiling: min(max, base*2^retry), computed without overflow.
		ceil := maxDelay
		if retry < 63 && base <= maxDelay>>retry {
			ceil = base << retry // cannot overflow: it is at most maxDelay
		}
		d, ok := b.delay(retry, ra, hasRA, budget)

		want := time.Duration(float64(ceil) * r)
		if hasRA && ra > want {
			want = ra
		}
		if ok != (want < budget) {
			t.Fatalf("ok = %t for a wait of %v in a budget of %v", ok, want, budget)
		}
		if !ok {
			return
		}
		if d < 0 || d >= budget {
			t.Fatalf("delay %v outside [0, budget %v)", d, budget)
		}
		if hasRA {
			if d < ra || d > max(ra, ceil) {
				t.Fatalf("delay %v with Retry-After %v, ceiling %v", d, ra, ceil)
			}
		} else if d > ceil {
			t.Fatalf("delay %v over the ceiling %v (base %v, retry %d, max %v)", d, ceil, base, retry, maxDelay)
		}
	})
}

func TestBackoffRejectsBadRandom(t *testing.T) {
	t.Parallel()
	for _, r := range []float64{-1, 2} {
		b := backoff{base: time.Second, max: time.Minute, rand: func() float64 { return r }}
		if d, ok := b.delay(3, 0, false, time.Hour); !ok || d < 0 || d > 8*time.Second {
			t.Fatalf("rand %v: delay %v, %t", r, d, ok)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		in     string
		want   time.Duration
		wantOK bool
	}{
		{"", 0, false},
		{"0", 0, true},
		{"7", 7 * time.Second, true},
		{" 120 ", 2 * time.Minute, true},
		{"-1", 0, false},
		{"1.5", 0, false},
		{"soon", 0, false},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second, true},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0, true},
		{"Wednesday, 02-Jan-30 03:04:15 GMT", 10 * time.Second, true}, // RFC 850
		{"Wed Jan  2 03:04:25 2030", 20 * time.Second, true},          // asctime
		{"99999999999999999999", 0, false},
		{"9999999999999", time.Duration(1<<63 - 1).Truncate(time.Second), true},
	}
	for _, tt := range tests {
		got, ok := parseRetryAfter(tt.in, now)
		if got != tt.want || ok != tt.wantOK {
			t.Fatalf("parseRetryAfter(%q) = %v, %t; want %v, %t", tt.in, got, ok, tt.want, tt.wantOK)
		}
	}
}

func TestBackoffCeilingIsExact(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		base, max time.Duration
		retry     int
		want      time.Duration
	}{
		{3, 7, 1, 6}, {3, 7, 2, 7}, {4, 8, 1, 8}, {time.Second, time.Minute, 0, time.Second},
		{33554432, time.Hour, 38, time.Hour}, {time.Millisecond, 5 * time.Second, 200, 5 * time.Second},
	} {
		if got := (backoff{base: c.base, max: c.max}).ceiling(c.retry); got != c.want {
			t.Fatalf("ceiling(base %v, max %v, retry %d) = %v, want %v", c.base, c.max, c.retry, got, c.want)
		}
	}
}
