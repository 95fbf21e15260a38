package postkeys

import (
	"context"
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

// Built-in fail points passed to [Config.FailPointFunc]. Each lies between
// two transactions of the attempt, never inside one: a fail point can pause
// an attempt or end it as a crash would, and the attempt commits the same
// transactions, with the same statements, whether FailPointFunc is set or
// not. The window a point opens is therefore one production has.
const (
	// FailPointAfterClaim is reached by a phased attempt right after the
	// transaction that claimed its key, or took its record over, committed.
	// After a claim or takeover of its own, RunFunc or ReconcileFunc has
	// not started: the record is in progress at its recovery point and
	// nothing else has happened. With [Operation.ClaimInFirstPhase], the
	// claim commits in the first phase's transaction, so the point follows
	// that commit: the phase's writes (and, with [Run.Complete], the
	// outcome) are committed too, and the phase's [FailPointAfterPhase]
	// comes next; when RunFunc renews or returns before any phase, the
	// claim is a transaction of its own and the point follows it. The
	// recovery worker's takeovers do not reach it.
	FailPointAfterClaim = "after_claim"
	// FailPointAfterPhase prefixes the point reached right after a phase's
	// transaction committed: "after_phase:" + the recovery point. After
	// [Run.Complete] that transaction stored the outcome too: an attempt
	// that ends there leaves the record completed and its client without
	// an answer, a lost response.
	FailPointAfterPhase = "after_phase:"
	// FailPointBeforeComplete is reached by a phased attempt right before
	// the transaction that stores its outcome. After RunFunc or
	// ReconcileFunc returned a response or a stored rejection, that is the
	// completion: every phase is committed, the outcome is not. With
	// [Run.Complete], it is the last phase's transaction, which stores the
	// outcome with the phase's writes: the point comes before it, and an
	// attempt that ends there leaves the record at the previous recovery
	// point (with ClaimInFirstPhase and no phase before, nothing at all).
	FailPointBeforeComplete = "before_complete"
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
	// FailPointFunc is for tests only: it is called at every fail point
	// (the built-in [FailPointAfterClaim], [FailPointAfterPhase] and
	// [FailPointBeforeComplete] points, and those an operation names with
	// [Run.FailPoint]); it may pause there, and an error abandons the
	// attempt there as a crash would (see [ErrAbandoned]). Setting it
	// changes no transaction an attempt commits. Defaults to nil: no fail
	// points.
	FailPointFunc func(ctx context.Context, operation, point string) error
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
