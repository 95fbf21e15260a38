package postkeys

import (
	"encoding/json"
	"net/http"
	"time"

	"gorm.io/gorm"
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

// Record is a stored idempotency record, as [Adapter.Lookup] and a
// RenderFunc see it.
type Record struct {
	Tenant             string
	Operation          string
	Key                string
	Fingerprint        string
	FingerprintVersion int
	State              State
	RecoveryPoint      string
	Attempt            int64
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
}

// recordRow is the row shape of idempotency_records.
type recordRow struct {
	TenantID           string     `gorm:"column:tenant_id"`
	Operation          string     `gorm:"column:operation"`
	IdemKey            string     `gorm:"column:idem_key"`
	Fingerprint        string     `gorm:"column:fingerprint"`
	FingerprintVersion int        `gorm:"column:fingerprint_version"`
	State              string     `gorm:"column:state"`
	RecoveryPoint      string     `gorm:"column:recovery_point"`
	Attempt            int64      `gorm:"column:attempt"`
	LockedUntil        *time.Time `gorm:"column:locked_until"`
	ResponseStatus     *int       `gorm:"column:response_status"`
	ResponseHeaders    *string    `gorm:"column:response_headers"`
	ResponseBody       []byte     `gorm:"column:response_body"`
	ResponseTruncated  bool       `gorm:"column:response_truncated"`
	ResourceRef        *string    `gorm:"column:resource_ref"`
	ErrorCode          *string    `gorm:"column:error_code"`
	CreatedAt          time.Time  `gorm:"column:created_at"`
	UpdatedAt          time.Time  `gorm:"column:updated_at"`
	ExpiresAt          time.Time  `gorm:"column:expires_at"`
}

func (r *recordRow) record() Record {
	rec := Record{Tenant: r.TenantID, Operation: r.Operation, Key: r.IdemKey, Fingerprint: r.Fingerprint,
		FingerprintVersion: r.FingerprintVersion, State: State(r.State), RecoveryPoint: r.RecoveryPoint,
		Attempt: r.Attempt, ResponseBody: r.ResponseBody, Truncated: r.ResponseTruncated,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC()}
	if r.LockedUntil != nil {
		rec.LockedUntil = r.LockedUntil.UTC()
	}
	if r.ResponseStatus != nil {
		rec.ResponseStatus = *r.ResponseStatus
	}
	if r.ResponseHeaders != nil {
		_ = json.Unmarshal([]byte(*r.ResponseHeaders), &rec.ResponseHeader)
	}
	if r.ResourceRef != nil {
		rec.ResourceRef = *r.ResourceRef
	}
	if r.ErrorCode != nil {
		rec.ErrorCode = *r.ErrorCode
	}
	return rec
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

// recordStore holds every statement on idempotency_records. The SQL is the
// same for PostgreSQL and SQLite (INSERT … ON CONFLICT … DO UPDATE … WHERE
// … RETURNING, row values): a difference would go to store.Dialect. Every
// method takes the *gorm.DB to run on, a transaction or the pool, so that
// a record's writes join the caller's transaction. Times are parameters
// from the engine's clock, never the database's, so tests move time.
type recordStore struct{}

const table = "idempotency_records"

const pkWhere = "tenant_id = ? AND operation = ? AND idem_key = ?"

// insert takes a key nobody holds: a fresh in_progress record at attempt 1,
// in one INSERT … ON CONFLICT DO NOTHING. Unlike claim's DO UPDATE, a
// conflict takes no row lock (and so writes nothing); on PostgreSQL a
// conflicting uncommitted insert makes it wait for that transaction.
func (recordStore) insert(db *gorm.DB, id recordID, fingerprint string, version int, now, lockedUntil, expiresAt time.Time) (bool, error) {
	res := db.Exec(`INSERT INTO idempotency_records
    (tenant_id, operation, idem_key, fingerprint, fingerprint_version, state, recovery_point, attempt,
     locked_until, created_at, updated_at, expires_at)
VALUES (?, ?, ?, ?, ?, 'in_progress', ?, 1, ?, ?, ?, ?)
ON CONFLICT (tenant_id, operation, idem_key) DO NOTHING`,
		id.tenant, id.operation, id.key, fingerprint, version, PointStarted, lockedUntil, now, now, expiresAt)
	return res.RowsAffected == 1, res.Error
}

// claim inserts a fresh in_progress record, or reclaims an expired
// completed one, in one statement; it reports the attempt number and
// whether this caller now owns the record. A live record is left as it is
// (claimed is false). On PostgreSQL a conflicting uncommitted insert makes
// the statement wait for that transaction (bounded by the lock timeout).
func (recordStore) claim(db *gorm.DB, id recordID, fingerprint string, version int, now, lockedUntil, expiresAt time.Time) (attempt int64, claimed bool, err error) {
	var attempts []int64
	err = db.Raw(`INSERT INTO idempotency_records
    (tenant_id, operation, idem_key, fingerprint, fingerprint_version, state, recovery_point, attempt,
     locked_until, created_at, updated_at, expires_at)
VALUES (?, ?, ?, ?, ?, 'in_progress', ?, 1, ?, ?, ?, ?)
ON CONFLICT (tenant_id, operation, idem_key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    fingerprint_version = excluded.fingerprint_version,
    state = 'in_progress',
    recovery_point = excluded.recovery_point,
    attempt = idempotency_records.attempt + 1,
    locked_until = excluded.locked_until,
    response_status = NULL,
    response_headers = NULL,
    response_body = NULL,
    response_truncated = FALSE,
    resource_ref = NULL,
    error_code = NULL,
    created_at = excluded.created_at,
    updated_at = excluded.updated_at,
    expires_at = excluded.expires_at
WHERE idempotency_records.state = 'completed' AND idempotency_records.expires_at <= excluded.created_at
RETURNING attempt`,
		id.tenant, id.operation, id.key, fingerprint, version, PointStarted, lockedUntil, now, now, expiresAt).
		Scan(&attempts).Error
	if err != nil || len(attempts) == 0 {
		return 0, false, err
	}
	return attempts[0], true, nil
}

// get reads a record; found is false when there is none.
func (recordStore) get(db *gorm.DB, id recordID) (Record, bool, error) {
	var rows []recordRow
	if err := db.Table(table).Where(pkWhere, id.tenant, id.operation, id.key).Limit(1).Find(&rows).Error; err != nil {
		return Record{}, false, err
	}
	if len(rows) == 0 {
		return Record{}, false, nil
	}
	return rows[0].record(), true, nil
}

// takeover moves the record from state from (in_progress past its lease,
// or unknown) to in_progress under the next attempt number, if it is still
// at attempt seen: of several concurrent takers exactly one succeeds.
func (recordStore) takeover(db *gorm.DB, id recordID, seen int64, from State, lockedUntil, now time.Time) (bool, error) {
	res := db.Exec(`UPDATE idempotency_records
SET state = 'in_progress', attempt = attempt + 1, locked_until = ?, updated_at = ?
WHERE `+pkWhere+` AND attempt = ? AND state = ? AND (state = 'unknown' OR locked_until <= ?)`,
		lockedUntil, now, id.tenant, id.operation, id.key, seen, string(from), now)
	return res.RowsAffected == 1, res.Error
}

// advance records a phase's recovery point (and reference) and renews the
// lease, fenced by the attempt number.
func (recordStore) advance(db *gorm.DB, id recordID, attempt int64, point, ref string, lockedUntil, now time.Time) (bool, error) {
	var refArg any
	if ref != "" {
		refArg = ref
	}
	res := db.Exec(`UPDATE idempotency_records
SET recovery_point = ?, resource_ref = COALESCE(?, resource_ref), locked_until = ?, updated_at = ?
WHERE `+pkWhere+` AND attempt = ? AND state = 'in_progress'`,
		point, refArg, lockedUntil, now, id.tenant, id.operation, id.key, attempt)
	return res.RowsAffected == 1, res.Error
}

// renew extends the lease, fenced by the attempt number.
func (recordStore) renew(db *gorm.DB, id recordID, attempt int64, lockedUntil, now time.Time) (bool, error) {
	res := db.Exec(`UPDATE idempotency_records SET locked_until = ?, updated_at = ?
WHERE `+pkWhere+` AND attempt = ? AND state = 'in_progress'`,
		lockedUntil, now, id.tenant, id.operation, id.key, attempt)
	return res.RowsAffected == 1, res.Error
}

// complete stores the outcome, fenced by the attempt number.
func (recordStore) complete(db *gorm.DB, id recordID, attempt int64, resp storedResponse, now, expiresAt time.Time) (bool, error) {
	header, err := json.Marshal(resp.header)
	if err != nil {
		return false, err
	}
	var ref, code any
	if resp.ref != "" {
		ref = resp.ref
	}
	if resp.errorCode != "" {
		code = resp.errorCode
	}
	body := resp.body
	if body == nil && !resp.truncated {
		body = []byte{}
	}
	res := db.Exec(`UPDATE idempotency_records
SET state = 'completed', locked_until = NULL, response_status = ?, response_headers = ?, response_body = ?,
    response_truncated = ?, resource_ref = COALESCE(?, resource_ref), error_code = ?, updated_at = ?, expires_at = ?
WHERE `+pkWhere+` AND attempt = ? AND state = 'in_progress'`,
		resp.status, string(header), body, resp.truncated, ref, code, now, expiresAt,
		id.tenant, id.operation, id.key, attempt)
	return res.RowsAffected == 1, res.Error
}

// markUnknown records that the attempt failed after a side effect, fenced
// by the attempt number.
func (recordStore) markUnknown(db *gorm.DB, id recordID, attempt int64, code string, now time.Time) (bool, error) {
	res := db.Exec(`UPDATE idempotency_records SET state = 'unknown', locked_until = NULL, error_code = ?, updated_at = ?
WHERE `+pkWhere+` AND attempt = ? AND state = 'in_progress'`,
		code, now, id.tenant, id.operation, id.key, attempt)
	return res.RowsAffected == 1, res.Error
}

// release removes the record of an attempt that failed before any side
// effect, fenced by the attempt number: the key is free again.
func (recordStore) release(db *gorm.DB, id recordID, attempt int64) (bool, error) {
	res := db.Exec(`DELETE FROM idempotency_records WHERE `+pkWhere+` AND attempt = ? AND state = 'in_progress' AND recovery_point = ?`,
		id.tenant, id.operation, id.key, attempt, PointStarted)
	return res.RowsAffected == 1, res.Error
}

// unfinished lists up to limit records that need the recovery worker:
// in_progress past their lease, and unknown.
func (recordStore) unfinished(db *gorm.DB, now time.Time, limit int) ([]Record, error) {
	var rows []recordRow
	err := db.Table(table).
		Where("(state = 'in_progress' AND locked_until <= ?) OR state = 'unknown'", now).
		Order("updated_at").Limit(limit).Find(&rows).Error
	if err != nil {
		return nil, err
	}
	recs := make([]Record, len(rows))
	for i := range rows {
		recs[i] = rows[i].record()
	}
	return recs, nil
}

// deleteExpired deletes up to limit completed records past expires_at.
// In-progress and unknown records are never deleted.
func (recordStore) deleteExpired(db *gorm.DB, now time.Time, limit int) (int64, error) {
	res := db.Exec(`DELETE FROM idempotency_records
WHERE state = 'completed' AND expires_at <= ? AND (tenant_id, operation, idem_key) IN (
    SELECT tenant_id, operation, idem_key FROM idempotency_records
    WHERE state = 'completed' AND expires_at <= ?
    ORDER BY expires_at LIMIT ?)`, now, now, limit)
	return res.RowsAffected, res.Error
}

// oldestInProgress returns the creation time of the oldest in_progress
// record (zero when there is none).
func (recordStore) oldestInProgress(db *gorm.DB) (time.Time, error) {
	var rows []recordRow
	err := db.Table(table).Select("created_at").Where("state = 'in_progress'").Order("created_at").Limit(1).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return time.Time{}, err
	}
	return rows[0].CreatedAt.UTC(), nil
}

// countUnknown counts the unknown records.
func (recordStore) countUnknown(db *gorm.DB) (int64, error) {
	var n int64
	err := db.Table(table).Where("state = 'unknown'").Count(&n).Error
	return n, err
}
