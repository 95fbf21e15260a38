package store

import (
	"context"
	"time"

	"gorm.io/gorm"
)

// Records is the SQL of the idempotency records (the table
// idempotency_records that migrations.Up creates, its audit table
// idempotency_resolutions, and idempotency_operations, where services
// publish their operations' codes): one method per statement, each with its
// parameter struct, run on db, the caller's transaction (from [DB.Write])
// or the pool, so that a record's writes commit with the business writes.
// Each driver builds it ([Driver.Records]) from one portable template
// and its own spellings. The POST fallback (fallback/postkeys) is its
// user, calling it directly; a record's state is one of the
// [RecordState]s, and its recovery points, headers and codes are the
// caller's text.
//
// Every driver keeps these rules, which the contract suite (storetest's
// records.go) checks:
//   - Times are the database's clock, read by the statement itself; no
//     method takes a time from the process. (The framework's tests move
//     that clock with a test driver, storetest.ShiftRecordClock, never
//     through an argument of the production statements.)
//   - A claim and a takeover are each one statement against the primary
//     key (tenant, operation, key) and hand out a fence token that was
//     never handed out for that key before, not even after a release or
//     the janitor's delete.
//   - Every write of an attempt (Advance, Renew, Complete, MarkUnknown,
//     Release) applies only while its fence is the record's and the
//     record is in_progress with its lease still live on the database
//     clock; it reports false otherwise and writes nothing.
//   - Insert and Get take no row lock and write nothing when the key is
//     held, so that a replay is a read.
//   - Errors pass through unclassified (the caller classifies them with
//     [DB.Classify]).
//
// Like [Driver], it serves the framework's own packages and may gain
// methods in any release.
type Records interface {
	// Insert claims a key nobody holds: a fresh in_progress record at
	// attempt 1 with a new fence, with one INSERT … ON CONFLICT DO
	// NOTHING. ok is false when a record exists (live or not); a
	// concurrent insert of the key that commits first is "held" too (where
	// the database reports it as a duplicate key, MySQL). On PostgreSQL a
	// concurrent uncommitted insert of the key makes it wait for that
	// transaction, up to the lock timeout. Every statement on one key's
	// record marks a wait past the lock timeout for it ([KeyLocked]).
	Insert(ctx context.Context, db *gorm.DB, p *RecordClaimParams) (c RecordClaim, ok bool, err error)
	// Reclaim claims, in one statement, a key whose record is completed
	// and past expires_at on the database clock, or absent: a fresh
	// attempt with a new fence and attempt + 1. A live record is left as
	// it is (ok false).
	Reclaim(ctx context.Context, db *gorm.DB, p *RecordClaimParams) (c RecordClaim, ok bool, err error)
	// Get reads a record with its Expired and LeaseExpired flags as of the
	// database clock; found is false when there is none. On PostgreSQL it
	// is one numbered statement, with no gorm statement built.
	Get(ctx context.Context, db *gorm.DB, p *RecordGetParams) (row RecordRow, found bool, err error)
	// Takeover moves a record that is unknown, or in_progress past its
	// lease on the database clock, to a new attempt (a new fence, attempt
	// + 1, a new lease) if it still carries the fence the taker saw: of
	// several concurrent takers exactly one gets ok.
	Takeover(ctx context.Context, db *gorm.DB, p *RecordTakeoverParams) (c RecordClaim, ok bool, err error)
	// Advance records a phase's recovery point (and reference) and renews
	// the lease; fenced by token and live lease.
	Advance(ctx context.Context, db *gorm.DB, p *RecordAdvanceParams) (ok bool, err error)
	// Renew extends the lease; fenced by token and live lease.
	Renew(ctx context.Context, db *gorm.DB, p *RecordRenewParams) (ok bool, err error)
	// Complete stores the outcome (and, when p.Point is set, the recovery
	// point of the last phase), ends the lease and sets expires_at;
	// fenced by token and live lease.
	Complete(ctx context.Context, db *gorm.DB, p *RecordCompleteParams) (ok bool, err error)
	// MarkUnknown records that the attempt failed after a side effect
	// (state unknown, no lease); fenced by token and live lease.
	MarkUnknown(ctx context.Context, db *gorm.DB, p *RecordMarkUnknownParams) (ok bool, err error)
	// Release deletes the record of an attempt whose recovery point is
	// still p.Point: the key is free again. Fenced by token and live
	// lease; the next claim draws a new fence.
	Release(ctx context.Context, db *gorm.DB, p *RecordReleaseParams) (ok bool, err error)
	// ListUnfinished lists up to p.Limit records that need the recovery
	// worker, oldest update first: in_progress past their lease, and
	// unknown.
	ListUnfinished(ctx context.Context, db *gorm.DB, p *RecordListUnfinishedParams) ([]RecordRow, error)
	// DeleteExpired deletes up to p.Limit completed records past
	// expires_at, in one statement, and returns how many. It never
	// deletes in_progress or unknown records.
	DeleteExpired(ctx context.Context, db *gorm.DB, p *RecordDeleteExpiredParams) (int64, error)
	// Stats reads the age of the oldest in_progress record and the count
	// of unknown ones, on the database clock.
	Stats(ctx context.Context, db *gorm.DB) (RecordStats, error)
	// List lists up to p.Limit records that match p's filters, oldest
	// creation first, with their Expired and LeaseExpired flags as of the
	// database clock. It takes no lock and writes nothing. A Limit that
	// is not positive, or a negative OlderThan, is an error.
	List(ctx context.Context, db *gorm.DB, p *RecordListParams) ([]RecordRow, error)
	// CountExpired counts the completed records past expires_at: what
	// DeleteExpired would delete.
	CountExpired(ctx context.Context, db *gorm.DB) (int64, error)
	// Audit writes the audit row of an operator's resolution
	// (idempotency_resolutions), stamped with the database clock.
	Audit(ctx context.Context, db *gorm.DB, p *RecordAuditParams) error
	// PutOperation writes (or replaces) what a service declares of one
	// operation (idempotency_operations), stamped with the database
	// clock.
	PutOperation(ctx context.Context, db *gorm.DB, p *RecordOperation) error
	// GetOperation reads what the last service to publish operation
	// declared of it; found is false when none did.
	GetOperation(ctx context.Context, db *gorm.DB, operation string) (op RecordOperation, found bool, err error)
}

// RecordState is the state of an idempotency record (DESIGN §6): the
// statements of [Records] set and test these three. A completed record
// past its expires_at counts as absent ([RecordRow].Expired) and is
// reclaimed by the next claim.
type RecordState string

// The states of a record.
const (
	// RecordInProgress: an attempt holds the record under a lease.
	RecordInProgress RecordState = "in_progress"
	// RecordCompleted: the record holds the outcome, replayed until
	// expires_at.
	RecordCompleted RecordState = "completed"
	// RecordUnknown: an attempt failed after a side effect; the outcome
	// is being reconciled.
	RecordUnknown RecordState = "unknown"
)

// RecordKey is a record's primary key.
type RecordKey struct {
	Tenant    string
	Operation string
	Key       string
}

// RecordClaim is what a claim or a takeover hands the new attempt.
type RecordClaim struct {
	// Fence is the attempt's fencing token.
	Fence int64
	// Attempt is the attempt's number in the record's current life.
	Attempt int64
}

// RecordRow is a row of idempotency_records, with the flags the reading
// statement computes on the database clock. Its times are UTC.
type RecordRow struct {
	ID                 RecordKey
	Fingerprint        string
	FingerprintVersion int
	State              RecordState
	RecoveryPoint      string
	Attempt            int64
	Fence              int64
	// LockedUntil is the lease's end (zero when none).
	LockedUntil    time.Time
	ResponseStatus int
	// ResponseHeaders is the stored header text (as the caller encoded
	// it; empty when none).
	ResponseHeaders string
	// ResponseBody is nil when the body was not stored (Truncated).
	ResponseBody []byte
	Truncated    bool
	ResourceRef  string
	ErrorCode    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	ExpiresAt    time.Time
	// Expired: completed and past expires_at on the database clock.
	Expired bool
	// LeaseExpired: LockedUntil had passed on the database clock.
	LeaseExpired bool
}

// RecordClaimParams are the arguments of [Records.Insert] and
// [Records.Reclaim].
type RecordClaimParams struct {
	ID                 RecordKey
	Fingerprint        string
	FingerprintVersion int
	// Point is the recovery point of the new attempt.
	Point string
	// Lease is how long the new attempt owns the record, from the database
	// clock at the claim.
	Lease time.Duration
	// TTL sets expires_at (database clock + TTL) until completion sets it
	// again.
	TTL time.Duration
}

// RecordGetParams are the arguments of [Records.Get].
type RecordGetParams struct {
	ID RecordKey
}

// RecordTakeoverParams are the arguments of [Records.Takeover].
type RecordTakeoverParams struct {
	ID RecordKey
	// Fence is the token the taker saw on the record.
	Fence int64
	// From is the state the taker saw: RecordUnknown, or
	// RecordInProgress (then the lease must have ended on the database
	// clock).
	From  RecordState
	Lease time.Duration
}

// RecordAdvanceParams are the arguments of [Records.Advance].
type RecordAdvanceParams struct {
	ID    RecordKey
	Fence int64
	// Point is the new recovery point.
	Point string
	// Ref, when not empty, replaces the resource reference.
	Ref   string
	Lease time.Duration
}

// RecordRenewParams are the arguments of [Records.Renew].
type RecordRenewParams struct {
	ID    RecordKey
	Fence int64
	Lease time.Duration
}

// RecordOutcome is the response a record stores, in [RecordCompleteParams].
type RecordOutcome struct {
	Status int
	// Headers is the header text to store (the caller's encoding).
	Headers string
	// Body is stored as is; a nil Body is stored empty unless Truncated,
	// which stores none.
	Body      []byte
	Truncated bool
	// Ref, when not empty, is the resource reference (Complete: replaces
	// it).
	Ref       string
	ErrorCode string
	// TTL is the replay window: expires_at = database clock + TTL.
	TTL time.Duration
}

// RecordCompleteParams are the arguments of [Records.Complete].
type RecordCompleteParams struct {
	ID    RecordKey
	Fence int64
	// Point, when not empty, replaces the recovery point.
	Point string
	RecordOutcome
}

// RecordMarkUnknownParams are the arguments of [Records.MarkUnknown].
type RecordMarkUnknownParams struct {
	ID        RecordKey
	Fence     int64
	ErrorCode string
}

// RecordReleaseParams are the arguments of [Records.Release].
type RecordReleaseParams struct {
	ID    RecordKey
	Fence int64
	// Point is the recovery point the record must still be at.
	Point string
}

// RecordListUnfinishedParams are the arguments of
// [Records.ListUnfinished].
type RecordListUnfinishedParams struct {
	Limit int
}

// RecordDeleteExpiredParams are the arguments of [Records.DeleteExpired].
type RecordDeleteExpiredParams struct {
	Limit int
}

// RecordListParams are the filters of [Records.List]; a zero field does
// not filter.
type RecordListParams struct {
	Tenant    string
	Operation string
	State     RecordState
	// OlderThan keeps the records created at least that long ago on the
	// database clock.
	OlderThan time.Duration
	// Limit bounds the records listed. Required (positive).
	Limit int
}

// RecordStats are what [Records.Stats] reads.
type RecordStats struct {
	// OldestInProgress is the age of the oldest in_progress record on the
	// database clock (0 when there is none).
	OldestInProgress time.Duration
	// Unknown counts the unknown records.
	Unknown int64
}

// RecordAuditParams are the arguments of [Records.Audit].
type RecordAuditParams struct {
	Tenant    string
	Operation string
	// KeyHash is what the audit row keeps of the key: its SHA-256
	// (telemetry.KeyHash), never the key.
	KeyHash string
	// Fence is the fence of the resolution's takeover.
	Fence int64
	// From is the state the operator found.
	From RecordState
	// Outcome is the resolution's outcome ("succeeded", "failed").
	Outcome string
	Status  int
	// Reference (succeeded) or ErrorCode (failed); empty stores NULL.
	Reference string
	ErrorCode string
	Actor     string
	Reason    string
}

// RecordOperation is a row of idempotency_operations: what a service
// declared of one of its operations, for the operator's tooling.
type RecordOperation struct {
	Operation string
	// Codes is the declaration's text (the caller's encoding).
	Codes string
	// UpdatedAt is when it was last published (database clock; read
	// only).
	UpdatedAt time.Time
}
