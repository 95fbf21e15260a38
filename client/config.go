package client

import (
	"context"
	cryptorand "crypto/rand"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
)

// Config tunes a [Client]. The zero value is usable: every field has a
// default, and [New] rejects values out of range with [ErrInvalidConfig].
type Config struct {
	// HTTPClient sends the requests. Its own Timeout, if any, applies to
	// each attempt. Defaults to [http.DefaultClient].
	HTTPClient *http.Client

	// Token is sent as "Authorization: Bearer <Token>". Defaults to "" (no
	// Authorization header).
	Token string

	// RefreshTokenFunc is called when the server answers 401. It returns
	// the token to use from then on; the client then sends the same request
	// again, with the same ID or key. A 401 right after a refresh is final,
	// so a permanently bad token costs one extra request, never a loop.
	// Defaults to nil: a 401 is final.
	RefreshTokenFunc func(ctx context.Context) (string, error)

	// KeyStore persists the ID or key of each logical operation that names
	// an Operation, before its first attempt, so that a restarted process
	// resumes it with the same ID or key. Defaults to nil: IDs and keys live
	// in memory for the duration of one call.
	KeyStore KeyStore

	// ReplayWindow is how long the server remembers an idempotency key (its
	// replay window). [Client.Post] refuses to reuse a key that the
	// KeyStore saved longer ago than this, with a [*KeyExpiredError]. Set
	// it to the server's window when that is not the default. Defaults to
	// 24 hours, retrysafe's default.
	ReplayWindow time.Duration

	// MaxAttempts caps the requests sent for one logical operation, the
	// first one included. Must be ≥ 1. Size it so that MaxElapsed, not the
	// count, ends the retries of a write whose key another attempt holds:
	// each such try is answered after the server's in-progress wait
	// (retrysafe's default: 1 s) with a Retry-After of 1 s, so a key held
	// for all of MaxElapsed costs up to MaxElapsed / 2 s tries. Defaults
	// to [DefaultMaxAttempts], 50.
	MaxAttempts int

	// MaxElapsed caps the time from the start of the first attempt to the
	// end of the last one, backoff waits included: a retry whose wait
	// would end past it is not made, and the last attempt's timeout is cut
	// to what is left.
	//
	// Size it to outlast the server's lease. An attempt that dies (its
	// process killed, its connection cut) holds its key until its lease
	// ends, up to the lease (retrysafe's default: 30 s) after its last
	// commit; meanwhile retries get 409 request_in_progress, and once it
	// has ended a retry, or the server's recovery worker, takes the
	// operation over. The client may learn of the loss only when its
	// AttemptTimeout passes, waits up to MaxDelay (and the server's
	// in-progress wait) for the next try, and the try that takes over
	// needs an AttemptTimeout of its own:
	//
	//	MaxElapsed ≥ lease + 2 × AttemptTimeout + MaxDelay + a few seconds
	//
	// With the defaults that is 30 s + 2 × 10 s + 5 s = 55 s and more.
	// Defaults to [DefaultMaxElapsed], 90 seconds, which also leaves room
	// for the recovery worker's turn; raise it with the server's lease.
	MaxElapsed time.Duration

	// AttemptTimeout bounds each attempt (connect, send, read the whole
	// response); an attempt that times out is retried. Defaults to 10
	// seconds.
	AttemptTimeout time.Duration

	// BaseDelay is the backoff ceiling before the first retry; it doubles
	// with every retry up to MaxDelay, and the actual wait is drawn
	// uniformly below it (full jitter). Defaults to 100 milliseconds.
	BaseDelay time.Duration

	// MaxDelay caps the backoff ceiling. A server's Retry-After is honoured
	// even when longer, within MaxElapsed. Must be ≥ BaseDelay. Defaults to
	// 5 seconds, or BaseDelay when that is longer.
	MaxDelay time.Duration

	// UUIDVersion selects the resource IDs and idempotency keys the client
	// generates: 7 (time-ordered, friendlier to B-tree indexes) or 4
	// (fully random). Defaults to 7.
	UUIDVersion int

	// MaxResponseBytes caps the response body the client reads. Defaults to
	// 10 MiB.
	MaxResponseBytes int64

	// UserAgent is sent as User-Agent. Defaults to "retrysafe-go-client".
	UserAgent string

	// Logger receives one debug event per attempt (method, path, attempt,
	// status, code, decision, SHA-256 of the key; never the raw key or the
	// token). Defaults to a logger that discards everything.
	Logger *slog.Logger

	// NowFunc is the clock used for the elapsed-time cap and HTTP-date
	// Retry-After values. Defaults to [time.Now].
	NowFunc func() time.Time

	// SleepFunc waits d or until ctx is done, returning ctx.Err() in the
	// latter case. Defaults to a timer-based wait.
	SleepFunc func(ctx context.Context, d time.Duration) error

	// RandFunc returns a number in [0, 1) used for jitter. Defaults to
	// math/rand/v2's Float64.
	RandFunc func() float64

	// RandReader is the entropy for generated IDs and keys; it must be safe
	// for concurrent use. Defaults to crypto/rand.Reader.
	RandReader io.Reader
}

// Defaults of [Config].
const (
	DefaultReplayWindow     = 24 * time.Hour
	DefaultMaxAttempts      = 50
	DefaultMaxElapsed       = 90 * time.Second
	DefaultAttemptTimeout   = 10 * time.Second
	DefaultBaseDelay        = 100 * time.Millisecond
	DefaultMaxDelay         = 5 * time.Second
	DefaultUUIDVersion      = 7
	DefaultMaxResponseBytes = 10 << 20
	DefaultUserAgent        = "retrysafe-go-client"
)

// withDefaults returns a copy of cfg (nil allowed) with defaults applied and
// validated.
func (cfg *Config) withDefaults() (Config, error) {
	var c Config
	if cfg != nil {
		c = *cfg
	}
	if c.HTTPClient == nil {
		c.HTTPClient = http.DefaultClient
	}
	setDefault(&c.ReplayWindow, DefaultReplayWindow)
	setDefault(&c.MaxAttempts, DefaultMaxAttempts)
	setDefault(&c.MaxElapsed, DefaultMaxElapsed)
	setDefault(&c.AttemptTimeout, DefaultAttemptTimeout)
	setDefault(&c.BaseDelay, DefaultBaseDelay)
	setDefault(&c.MaxDelay, max(DefaultMaxDelay, c.BaseDelay))
	setDefault(&c.UUIDVersion, DefaultUUIDVersion)
	setDefault(&c.MaxResponseBytes, DefaultMaxResponseBytes)
	setDefault(&c.UserAgent, DefaultUserAgent)
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.SleepFunc == nil {
		c.SleepFunc = sleep
	}
	if c.RandFunc == nil {
		c.RandFunc = rand.Float64
	}
	if c.RandReader == nil {
		c.RandReader = cryptorand.Reader
	}

	switch {
	case c.ReplayWindow < 0:
		return c, fmt.Errorf("%w: ReplayWindow must not be negative, got %v", ErrInvalidConfig, c.ReplayWindow)
	case c.MaxAttempts < 1:
		return c, fmt.Errorf("%w: MaxAttempts must be at least 1, got %d", ErrInvalidConfig, c.MaxAttempts)
	case c.MaxElapsed < 0:
		return c, fmt.Errorf("%w: MaxElapsed must not be negative, got %v", ErrInvalidConfig, c.MaxElapsed)
	case c.AttemptTimeout < 0:
		return c, fmt.Errorf("%w: AttemptTimeout must not be negative, got %v", ErrInvalidConfig, c.AttemptTimeout)
	case c.BaseDelay < 0:
		return c, fmt.Errorf("%w: BaseDelay must not be negative, got %v", ErrInvalidConfig, c.BaseDelay)
	case c.MaxDelay < c.BaseDelay:
		return c, fmt.Errorf("%w: MaxDelay (%v) must be at least BaseDelay (%v)", ErrInvalidConfig, c.MaxDelay, c.BaseDelay)
	case c.UUIDVersion != 4 && c.UUIDVersion != 7:
		return c, fmt.Errorf("%w: UUIDVersion must be 4 or 7, got %d", ErrInvalidConfig, c.UUIDVersion)
	case c.MaxResponseBytes < 0:
		return c, fmt.Errorf("%w: MaxResponseBytes must not be negative, got %d", ErrInvalidConfig, c.MaxResponseBytes)
	}
	return c, nil
}

func setDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// sleep is the default [Config.SleepFunc].
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
