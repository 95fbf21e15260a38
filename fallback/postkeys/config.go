package postkeys

import (
	"errors"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/wire"
)

// Defaults of [Config].
const (
	DefaultLeaseDuration     = 30 * time.Second
	DefaultInProgressWait    = time.Second
	DefaultPollInterval      = 50 * time.Millisecond
	DefaultMaxStoredBody     = 64 << 10
	DefaultRecoveryInterval  = 10 * time.Second
	DefaultRecoveryBatchSize = 100
	DefaultCleanupInterval   = time.Minute
	DefaultCleanupBatchSize  = 1000
)

// Config tunes [New]. The zero value is ready to use; the record TTL is the
// engine's [framework.Retention.ReplayWindow].
type Config struct {
	// LeaseDuration is how long an attempt of a phased operation owns its
	// record before a retry or the recovery worker may take it over. Every
	// phase commit and [Run.Renew] extend it ([Run.RenewFor] when what is
	// left may not cover the step it guards). Defaults to 30s.
	LeaseDuration time.Duration
	// InProgressWait is how long a request that finds its key being
	// executed (live lease) polls for the outcome before answering 409
	// request_in_progress. Defaults to 1s; a negative value answers at once.
	InProgressWait time.Duration
	// PollInterval is the pause between two looks at a record in progress.
	// Defaults to 50ms.
	PollInterval time.Duration
	// MaxStoredBody caps a stored response body in bytes. A larger body is
	// not stored: the record keeps the resource reference and the
	// operation's RenderFunc re-renders the body on replay. Defaults to
	// 64 KiB.
	MaxStoredBody int
	// StoredHeaders is the allow-list of response headers that are stored
	// and replayed (and the only ones an operation's response may set).
	// Defaults to Content-Type, Location and ETag.
	StoredHeaders []string
	// RecoveryInterval is the pause between two runs of the recovery worker
	// started by [Adapter.Start]. Defaults to 10s.
	RecoveryInterval time.Duration
	// RecoveryBatchSize bounds the records one recovery run looks at.
	// Defaults to 100.
	RecoveryBatchSize int
	// CleanupInterval is the pause between two runs of the janitor started
	// by [Adapter.Start]. Defaults to 1m.
	CleanupInterval time.Duration
	// CleanupBatchSize bounds the rows one janitor DELETE removes. Defaults
	// to 1000.
	CleanupBatchSize int
	// ReplayCache is how many bytes of bodies each operation keeps the
	// commands of for retries of the same bytes ([framework.ReplayCache]):
	// once a request with a
	// key was replayed, a retry that repeats its body (with the same
	// tenant, path parameters and semantic headers, and at most
	// [framework.MaxReplayCacheBody] long) takes its bound command and
	// fingerprint from the cache instead of binding and fingerprinting it
	// again, and is answered when the record it reads is a completed one
	// of this request; anything else binds the body again and takes the
	// usual path. This needs the command's Default, Check, Normalize and
	// validation to depend on the body alone. Defaults to
	// [framework.DefaultReplayCache]; negative keeps none.
	ReplayCache int
}

func (c Config) withDefaults() (Config, error) {
	if c.LeaseDuration < 0 || c.PollInterval < 0 || c.MaxStoredBody < 0 || c.RecoveryInterval < 0 ||
		c.RecoveryBatchSize < 0 || c.CleanupInterval < 0 || c.CleanupBatchSize < 0 {
		return c, errors.New("postkeys: Config durations and sizes must not be negative")
	}
	if c.LeaseDuration == 0 {
		c.LeaseDuration = DefaultLeaseDuration
	}
	if c.InProgressWait == 0 {
		c.InProgressWait = DefaultInProgressWait
	}
	if c.PollInterval == 0 {
		c.PollInterval = DefaultPollInterval
	}
	if c.MaxStoredBody == 0 {
		c.MaxStoredBody = DefaultMaxStoredBody
	}
	if c.StoredHeaders == nil {
		c.StoredHeaders = []string{wire.HeaderContentType, wire.HeaderLocation, wire.HeaderETag}
	}
	c.StoredHeaders = append([]string(nil), c.StoredHeaders...)
	for i, h := range c.StoredHeaders {
		if h == "" {
			return c, errors.New("postkeys: empty name in Config.StoredHeaders")
		}
		c.StoredHeaders[i] = http.CanonicalHeaderKey(h)
	}
	if c.RecoveryInterval == 0 {
		c.RecoveryInterval = DefaultRecoveryInterval
	}
	if c.RecoveryBatchSize == 0 {
		c.RecoveryBatchSize = DefaultRecoveryBatchSize
	}
	if c.CleanupInterval == 0 {
		c.CleanupInterval = DefaultCleanupInterval
	}
	if c.CleanupBatchSize == 0 {
		c.CleanupBatchSize = DefaultCleanupBatchSize
	}
	return c, nil
}
