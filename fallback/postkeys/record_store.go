package postkeys

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

// State is the state of an idempotency record.
type State string

// The states of the POST fallback's state machine (DESIGN §6). A record
// past its expires_at is treated as absent and is reclaimed by the next
// claim; the janitor deletes it.
const (
	StateInProgress State = "in_progress"
	StateCompleted  State = "completed"
	StateUnknown    State = "unknown"
	// stateReleased is logged when a record is removed; it is never stored.
	stateReleased State = "released"
)

// RecordID names a record: its primary key.
type RecordID struct {
	Tenant    string
	Operation string
	Key       string
}

// Record is a stored idempotency record, as [Adapter.Lookup], a RenderFunc
// and a [RecordStore] see it. Its times are the database's.
type Record struct {
	Tenant             string
	Operation          string
	Key                string
	Fingerprint        string
	FingerprintVersion int
	State              State
	RecoveryPoint      string
	// Attempt counts the attempts of the record's current life (1 for
	// the claim, +1 per takeover).
	Attempt int64
	// Fence is the fencing token of the attempt that owns the record: it
	// never repeats for a key, across releases, re-claims and the
	// janitor's deletes.
	Fence int64
	// LockedUntil is the lease of the attempt in progress (zero when none).
	LockedUntil    time.Time
	ResponseStatus int
	ResponseHeader http.Header
	// ResponseBody is nil when the body was over the cap (Truncated).
	ResponseBody []byte
	Truncated    bool
	ResourceRef  string
	ErrorCode    string
	CreatedAt    time.Time
	UpdatedAt    time.Time
	ExpiresAt    time.Time
	// Expired reports that the record was completed and past expires_at
	// on the database clock when it was read: it counts as absent.
	Expired bool
	// LeaseExpired reports that LockedUntil had passed on the database
	// clock when the record was read.
	LeaseExpired bool
}

// ID returns the record's primary key.
func (r Record) ID() RecordID { return RecordID{r.Tenant, r.Operation, r.Key} }

// Claim is what a successful claim or takeover hands the new attempt.
type Claim struct {
	// Fence is the attempt's fencing token: every later write of the
	// attempt names it.
	Fence int64
	// Attempt is the attempt's number in the record's current life.
	Attempt int64
}

// ClaimParams are the arguments of [RecordStore.Insert] and
// [RecordStore.Reclaim].
type ClaimParams struct {
	ID                 RecordID
	Fingerprint        string
	FingerprintVersion int
	// Lease is how long the new attempt owns the record, from the database
	// clock at the claim.
	Lease time.Duration
	// TTL sets expires_at (database clock + TTL) until completion sets it
	// again.
	TTL time.Duration
}

// TakeoverParams are the arguments of [RecordStore.Takeover].
type TakeoverParams struct {
	ID RecordID
	// Fence is the token the taker saw on the record.
	Fence int64
	// From is the state the taker saw: StateUnknown, or StateInProgress
	// (then the lease must have expired on the database clock).
	From  State
	Lease time.Duration
}

// AdvanceParams are the arguments of [RecordStore.Advance].
type AdvanceParams struct {
	ID    RecordID
	Fence int64
	// Point is the new recovery point.
	Point string
	// Ref, when not empty, replaces the resource reference.
	Ref   string
	Lease time.Duration
}

// RenewParams are the arguments of [RecordStore.Renew].
type RenewParams struct {
	ID    RecordID
	Fence int64
	Lease time.Duration
}

// CompleteParams are the arguments of [RecordStore.Complete]: the outcome
// to store.
type CompleteParams struct {
	ID     RecordID
	Fence  int64
	Status int
	Header http.Header
	// Body is stored as is; nil with Truncated.
	Body      []byte
	Truncated bool
	// Ref, when not empty, replaces the resource reference.
	Ref string
	// Point, when not empty, replaces the recovery point: the last phase
	// and the completion commit in one statement ([Run.Complete]).
	Point     string
	ErrorCode string
	// TTL is the replay window: expires_at = database clock + TTL.
	TTL time.Duration
}

// MarkUnknownParams are the arguments of [RecordStore.MarkUnknown].
type MarkUnknownParams struct {
	ID        RecordID
	Fence     int64
	ErrorCode string
}

// ReleaseParams are the arguments of [RecordStore.Release].
type ReleaseParams struct {
	ID    RecordID
	Fence int64
}

// RecordStats are what the gauges show.
type RecordStats struct {
	// OldestInProgress is the age of the oldest in_progress record on the
	// database clock (0 when there is none).
	OldestInProgress time.Duration
	// Unknown counts the unknown records.
	Unknown int64
}

// RecordStore is the one seam for the idempotency records: every
// statement the POST fallback issues on idempotency_records is a method
// here. Each method runs on db, the caller's transaction (from
// store.DB.Write) or the pool, so that a record's writes commit together
// with the business writes. [NewRecordStore]'s runs the SQL that each
// database's driver holds ([store.Records]).
//
// Every implementation keeps these rules, which the contract suite in
// recordstoretest checks:
//   - Times are the database's clock, read by the statement itself; no
//     method takes a time from the process.
//   - A claim and a takeover are each one statement and hand out a fence
//     token that was never handed out for that key before.
//   - Every write of an attempt (Advance, Renew, Complete, MarkUnknown,
//     Release) applies only while its fence is the record's and the record
//     is in_progress with its lease still live on the database clock; it
//     reports false otherwise and writes nothing.
//   - Insert and Get take no row lock and write nothing when the key is
//     held, so that a replay is a read.
//   - Errors pass through unclassified; the caller classifies them with
//     store.DB.Classify. A wait past the lock timeout for the key's
//     record is store.ErrLockTimeout marked with store.KeyLocked (409
//     request_in_progress); any other lock timeout is 503 unavailable.
type RecordStore interface {
	// Insert claims a key nobody holds: a fresh in_progress record at
	// attempt 1, with one INSERT … ON CONFLICT DO NOTHING. ok is false when
	// a record exists (live or not). On PostgreSQL a concurrent uncommitted
	// insert of the key makes it wait for that transaction, up to the lock
	// timeout.
	Insert(ctx context.Context, db *gorm.DB, p ClaimParams) (c Claim, ok bool, err error)
	// Reclaim claims a key whose record is completed and expired, or
	// absent, in one statement; a live record is left as it is (ok false).
	Reclaim(ctx context.Context, db *gorm.DB, p ClaimParams) (c Claim, ok bool, err error)
	// Get reads a record with its Expired and LeaseExpired flags as of the
	// database clock; found is false when there is none.
	Get(ctx context.Context, db *gorm.DB, id RecordID) (rec Record, found bool, err error)
	// Takeover moves a record that is unknown, or in_progress past its
	// lease, to a new attempt, if it still carries the fence the taker saw:
	// of several concurrent takers exactly one gets ok.
	Takeover(ctx context.Context, db *gorm.DB, p TakeoverParams) (c Claim, ok bool, err error)
	// Advance records a phase's recovery point (and reference) and renews
	// the lease; fenced.
	Advance(ctx context.Context, db *gorm.DB, p AdvanceParams) (ok bool, err error)
	// Renew extends the lease; fenced.
	Renew(ctx context.Context, db *gorm.DB, p RenewParams) (ok bool, err error)
	// Complete stores the outcome (and, when p.Point is set, the recovery
	// point of the last phase) and ends the lease; fenced.
	Complete(ctx context.Context, db *gorm.DB, p CompleteParams) (ok bool, err error)
	// MarkUnknown records that the attempt failed after a side effect;
	// fenced.
	MarkUnknown(ctx context.Context, db *gorm.DB, p MarkUnknownParams) (ok bool, err error)
	// Release removes the record of an attempt still at [PointStarted]:
	// the key is free again. Fenced; the next claim draws a new fence.
	Release(ctx context.Context, db *gorm.DB, p ReleaseParams) (ok bool, err error)
	// ListUnfinished lists up to limit records that need the recovery
	// worker, oldest update first: in_progress past their lease, and
	// unknown.
	ListUnfinished(ctx context.Context, db *gorm.DB, limit int) ([]Record, error)
	// DeleteExpired deletes up to limit completed records past expires_at,
	// in one statement. It never deletes in_progress or unknown records.
	DeleteExpired(ctx context.Context, db *gorm.DB, limit int) (int64, error)
	// Stats reads what the gauges show.
	Stats(ctx context.Context, db *gorm.DB) (RecordStats, error)
	// List lists up to p.Limit records that match p's filters, oldest
	// creation first, with their Expired and LeaseExpired flags as of the
	// database clock. It takes no lock and writes nothing.
	List(ctx context.Context, db *gorm.DB, p ListParams) ([]Record, error)
	// CountExpired counts the completed records past expires_at: what
	// DeleteExpired would delete.
	CountExpired(ctx context.Context, db *gorm.DB) (int64, error)
	// Audit writes the audit row of an operator's resolution
	// (idempotency_resolutions), stamped with the database clock. [Resolve]
	// writes it in the transaction that completes the record.
	Audit(ctx context.Context, db *gorm.DB, p AuditParams) error
	// PutOperation writes (or replaces) what a service declares of one of
	// its operations (idempotency_operations), stamped with the database
	// clock ([Adapter.PublishOperations]).
	PutOperation(ctx context.Context, db *gorm.DB, p OperationCodes) error
	// GetOperation reads what the last service to publish operation
	// declared of it; found is false when none did.
	GetOperation(ctx context.Context, db *gorm.DB, operation string) (p OperationCodes, found bool, err error)
}

// OperationCodes is what a service declares of one of its operations for
// an operator's tooling: the problem codes the operation may answer (its
// RejectionCodes and Problems), each as the service's engine describes
// it. [Adapter.PublishOperations] writes it and [PublishedCodes] reads
// it.
type OperationCodes struct {
	Operation string
	Codes     []wire.CodeInfo
	// PublishedAt is when a service last published it, on the database
	// clock (set when read).
	PublishedAt time.Time
}

// ListParams are the filters of [RecordStore.List]; a zero field does not
// filter.
type ListParams struct {
	Tenant    string
	Operation string
	State     State
	// OlderThan keeps the records created at least that long ago on the
	// database clock.
	OlderThan time.Duration
	// Limit bounds the records listed. Required (positive).
	Limit int
}

// AuditParams are the arguments of [RecordStore.Audit]: who resolved a
// record, why, and to what.
type AuditParams struct {
	ID RecordID
	// Fence is the fence of the resolution's takeover.
	Fence int64
	// From is the state the operator found.
	From    State
	Outcome Outcome
	Status  int
	// Reference (succeeded) or ErrorCode (failed).
	Reference string
	ErrorCode string
	Actor     string
	Reason    string
}

// RecordStoreConfig configures [NewRecordStore]. The zero value is ready to
// use.
type RecordStoreConfig struct{}

// NewRecordStore returns the [RecordStore] of db's database, on the tables
// that migrations.Up creates: a thin layer over the SQL its driver holds
// ([store.Driver.Records]).
func NewRecordStore(db *store.DB, cfg RecordStoreConfig) (RecordStore, error) {
	if db == nil || db.Driver == nil {
		return nil, fmt.Errorf("postkeys: NewRecordStore needs a database")
	}
	return recordStore{db.Driver.Records()}, nil
}

// recordStore is the [RecordStore] on a driver's [store.Records]: it
// converts the adapter's types to the store's (states and outcomes as
// strings, headers as JSON, the key's hash for the audit row) and back.
type recordStore struct{ r store.Records }

var _ RecordStore = recordStore{}

func (s recordStore) Insert(ctx context.Context, db *gorm.DB, p ClaimParams) (Claim, bool, error) {
	c, ok, err := s.r.Insert(ctx, db, claimParams(p))
	return Claim(c), ok, err
}

func (s recordStore) Reclaim(ctx context.Context, db *gorm.DB, p ClaimParams) (Claim, bool, error) {
	c, ok, err := s.r.Reclaim(ctx, db, claimParams(p))
	return Claim(c), ok, err
}

func (s recordStore) Get(ctx context.Context, db *gorm.DB, id RecordID) (Record, bool, error) {
	row, found, err := s.r.Get(ctx, db, &store.RecordGetParams{ID: store.RecordKey(id)})
	if err != nil || !found {
		return Record{}, false, err
	}
	return record(&row), true, nil
}

func (s recordStore) Takeover(ctx context.Context, db *gorm.DB, p TakeoverParams) (Claim, bool, error) {
	c, ok, err := s.r.Takeover(ctx, db, &store.RecordTakeoverParams{ID: store.RecordKey(p.ID), Fence: p.Fence,
		From: string(p.From), Lease: p.Lease})
	return Claim(c), ok, err
}

func (s recordStore) Advance(ctx context.Context, db *gorm.DB, p AdvanceParams) (bool, error) {
	return s.r.Advance(ctx, db, &store.RecordAdvanceParams{ID: store.RecordKey(p.ID), Fence: p.Fence, Point: p.Point,
		Ref: p.Ref, Lease: p.Lease})
}

func (s recordStore) Renew(ctx context.Context, db *gorm.DB, p RenewParams) (bool, error) {
	return s.r.Renew(ctx, db, &store.RecordRenewParams{ID: store.RecordKey(p.ID), Fence: p.Fence, Lease: p.Lease})
}

func (s recordStore) Complete(ctx context.Context, db *gorm.DB, p CompleteParams) (bool, error) {
	o, err := storedOutcome(p)
	if err != nil {
		return false, err
	}
	return s.r.Complete(ctx, db, &store.RecordCompleteParams{ID: store.RecordKey(p.ID), Fence: p.Fence, Point: p.Point,
		RecordOutcome: o})
}

func (s recordStore) MarkUnknown(ctx context.Context, db *gorm.DB, p MarkUnknownParams) (bool, error) {
	return s.r.MarkUnknown(ctx, db, &store.RecordMarkUnknownParams{ID: store.RecordKey(p.ID), Fence: p.Fence,
		ErrorCode: p.ErrorCode})
}

func (s recordStore) Release(ctx context.Context, db *gorm.DB, p ReleaseParams) (bool, error) {
	return s.r.Release(ctx, db, &store.RecordReleaseParams{ID: store.RecordKey(p.ID), Fence: p.Fence, Point: PointStarted})
}

func (s recordStore) ListUnfinished(ctx context.Context, db *gorm.DB, limit int) ([]Record, error) {
	rows, err := s.r.ListUnfinished(ctx, db, &store.RecordListUnfinishedParams{Limit: limit})
	return records(rows), err
}

func (s recordStore) DeleteExpired(ctx context.Context, db *gorm.DB, limit int) (int64, error) {
	return s.r.DeleteExpired(ctx, db, &store.RecordDeleteExpiredParams{Limit: limit})
}

func (s recordStore) Stats(ctx context.Context, db *gorm.DB) (RecordStats, error) {
	stats, err := s.r.Stats(ctx, db)
	return RecordStats(stats), err
}

func (s recordStore) List(ctx context.Context, db *gorm.DB, p ListParams) ([]Record, error) {
	if p.Limit <= 0 || p.OlderThan < 0 {
		return nil, errors.New("postkeys: List needs a positive Limit and a non-negative OlderThan")
	}
	rows, err := s.r.List(ctx, db, &store.RecordListParams{Tenant: p.Tenant, Operation: p.Operation,
		State: string(p.State), OlderThan: p.OlderThan, Limit: p.Limit})
	return records(rows), err
}

func (s recordStore) CountExpired(ctx context.Context, db *gorm.DB) (int64, error) {
	return s.r.CountExpired(ctx, db)
}

func (s recordStore) Audit(ctx context.Context, db *gorm.DB, p AuditParams) error {
	return s.r.Audit(ctx, db, &store.RecordAuditParams{Tenant: p.ID.Tenant, Operation: p.ID.Operation,
		KeyHash: framework.KeyHash(p.ID.Key), Fence: p.Fence, From: string(p.From), Outcome: string(p.Outcome),
		Status: p.Status, Reference: p.Reference, ErrorCode: p.ErrorCode, Actor: p.Actor, Reason: p.Reason})
}

// codeJSON is a code as idempotency_operations stores it.
type codeJSON struct {
	Code      wire.Code `json:"code"`
	Status    int       `json:"status"`
	Title     string    `json:"title"`
	Retryable bool      `json:"retryable"`
}

func (s recordStore) PutOperation(ctx context.Context, db *gorm.DB, p OperationCodes) error {
	codes := make([]codeJSON, len(p.Codes))
	for i, c := range p.Codes {
		codes[i] = codeJSON(c)
	}
	text, err := json.Marshal(codes)
	if err != nil {
		return err
	}
	return s.r.PutOperation(ctx, db, &store.RecordOperation{Operation: p.Operation, Codes: string(text)})
}

func (s recordStore) GetOperation(ctx context.Context, db *gorm.DB, operation string) (OperationCodes, bool, error) {
	row, found, err := s.r.GetOperation(ctx, db, operation)
	if err != nil || !found {
		return OperationCodes{}, false, err
	}
	var codes []codeJSON
	if err := json.Unmarshal([]byte(row.Codes), &codes); err != nil {
		return OperationCodes{}, false, fmt.Errorf("postkeys: the codes published for operation %q: %w", operation, err)
	}
	out := OperationCodes{Operation: row.Operation, Codes: make([]wire.CodeInfo, len(codes)), PublishedAt: row.UpdatedAt}
	for i, c := range codes {
		out.Codes[i] = wire.CodeInfo(c)
	}
	return out, true, nil
}

func claimParams(p ClaimParams) *store.RecordClaimParams {
	return &store.RecordClaimParams{ID: store.RecordKey(p.ID), Fingerprint: p.Fingerprint,
		FingerprintVersion: p.FingerprintVersion, Point: PointStarted, Lease: p.Lease, TTL: p.TTL}
}

// storedOutcome is the stored form of p's outcome: its header as JSON.
func storedOutcome(p CompleteParams) (store.RecordOutcome, error) {
	header, err := json.Marshal(p.Header)
	if err != nil {
		return store.RecordOutcome{}, err
	}
	return store.RecordOutcome{Status: p.Status, Headers: string(header), Body: p.Body, Truncated: p.Truncated,
		Ref: p.Ref, ErrorCode: p.ErrorCode, TTL: p.TTL}, nil
}

func record(r *store.RecordRow) Record {
	rec := Record{Tenant: r.ID.Tenant, Operation: r.ID.Operation, Key: r.ID.Key, Fingerprint: r.Fingerprint,
		FingerprintVersion: r.FingerprintVersion, State: State(r.State), RecoveryPoint: r.RecoveryPoint,
		Attempt: r.Attempt, Fence: r.Fence, LockedUntil: r.LockedUntil, ResponseStatus: r.ResponseStatus,
		ResponseBody: r.ResponseBody, Truncated: r.Truncated, ResourceRef: r.ResourceRef, ErrorCode: r.ErrorCode,
		CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, ExpiresAt: r.ExpiresAt, Expired: r.Expired,
		LeaseExpired: r.LeaseExpired}
	if r.ResponseHeaders != "" {
		_ = json.Unmarshal([]byte(r.ResponseHeaders), &rec.ResponseHeader)
	}
	return rec
}

func records(rows []store.RecordRow) []Record {
	if rows == nil {
		return nil
	}
	recs := make([]Record, len(rows))
	for i := range rows {
		recs[i] = record(&rows[i])
	}
	return recs
}

// storedResponse is a response as the record keeps it.
type storedResponse struct {
	status    int
	header    http.Header
	body      []byte
	truncated bool
	ref       string
	errorCode string
}
