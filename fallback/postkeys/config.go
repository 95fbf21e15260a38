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

// Built-in fail points passed to [Config.FailPointFunc].
const (
	// FailPointBeforeComplete is reached by a phased attempt after its
	// RunFunc or ReconcileFunc returned and before the outcome is stored:
	// the business rows of every phase are committed, the record is not.
	// (With fail points set, [Run.Complete] commits its phase first and
	// the outcome after this point; without them the two commit together
	// and this window does not exist.)
	FailPointBeforeComplete = "before_complete"
	// FailPointAfterPhase prefixes the point reached right after a phase
	// committed: "after_phase:" + the recovery point.
	FailPointAfterPhase = "after_phase:"
	// FailPointAfterClaim is reached by a phased attempt right after its
	// claim (or takeover) committed and before its RunFunc or
	// ReconcileFunc starts: the record is in progress, nothing else has
	// happened. (Fail points turn [Operation.ClaimInFirstPhase] off, so
	// that this point always follows a claim of its own.)
	FailPointAfterClaim = "after_claim"
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
	// Records is the store of idempotency records. Defaults to
	// [NewRecordStore] on the engine's database.
	Records RecordStore
	// FailPointFunc is for tests only: it is called at every fail point
	// (the built-in [FailPointBeforeComplete] and [FailPointAfterPhase]
	// points, and those an operation names with [Run.FailPoint]); an error
	// abandons the attempt there as a crash would (see [ErrAbandoned]).
	// Defaults to nil: no fail points.
	FailPointFunc func(ctx context.Context, operation, point string) error
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
