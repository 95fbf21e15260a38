package postkeys

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/pipeline"
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

// RecordStore is the one seam for the SQL of idempotency records: every
// statement the POST fallback issues on idempotency_records is a method
// here. Each method runs on db, the caller's transaction (from
// store.DB.Write) or the pool, so that a record's writes commit together
// with the business writes.
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
//     store.DB.Classify (a wait past the lock timeout is
//     store.ErrLockTimeout).
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
	// Create writes, with a plain INSERT, the completed record of a key
	// the caller has just read as absent and executed without a claim in
	// this same transaction (a Local operation): attempt 1, a new fence,
	// c's fingerprint, p's outcome, recovery point p.Point or PointStarted.
	// p.ID and p.Fence are ignored (c.ID names the record). It may defer
	// the statement to the transaction's next round trip (pipeline.Later).
	// When a record of the key exists by then (a concurrent request with
	// the key committed first), that statement or store.DB.Write fails
	// with an error wrapping [ErrKeyTaken], and nothing of the transaction
	// commits.
	Create(ctx context.Context, db *gorm.DB, c ClaimParams, p CompleteParams) error
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
type RecordStoreConfig struct {
	// ClockOffset, when set, is added to the database clock in every
	// statement, as if the database's clock ran that far ahead. For tests
	// only: they move it to expire leases and replay windows instead of
	// sleeping. Defaults to nil: the database clock as it is.
	ClockOffset func() time.Duration
}

// NewRecordStore returns the [RecordStore] for db's dialect (PostgreSQL,
// SQLite or the MySQL family), on the table that migrations.Up creates.
func NewRecordStore(db *store.DB, cfg RecordStoreConfig) (RecordStore, error) {
	if db == nil {
		return nil, fmt.Errorf("postkeys: NewRecordStore needs a database")
	}
	var d recordDialect
	switch db.Driver.Name() {
	case "postgres":
		d = postgresRecords
	case "sqlite":
		d = sqliteRecords
	case "mysql":
		d = mysqlRecords
	default:
		return nil, fmt.Errorf("postkeys: no record store for dialect %q", db.Driver.Name())
	}
	return newGormRecordStore(d, db.Driver, cfg.ClockOffset), nil
}

var _ RecordStore = (*gormRecordStore)(nil)

// recordDialect is every spelling of the record SQL that differs between
// PostgreSQL and SQLite: the database clock, a time a duration from it,
// the next fence token, and an age in seconds. Everything else (ON
// CONFLICT … DO UPDATE … WHERE … RETURNING, row values) is written once.
type recordDialect struct {
	// now is the database clock, shifted by the named argument @off.
	now string
	// plus is now + the named argument %s (a duration).
	plus string
	// nextFence hands out the next fence token.
	nextFence string
	// ageSeconds is the age in seconds of the time expression %s.
	ageSeconds string
	// duration spells a duration as the argument now and plus take.
	duration func(time.Duration) string
	// numbered: the hot statements run with numbered placeholders, with
	// no gorm statement built (PostgreSQL).
	numbered bool
	// integer is the type of an integer CAST ("INTEGER" unless set).
	integer string
	// drawFence, when set, is the query that draws a fence token before a
	// reclaim or a takeover, whose statements (in statements) take it as
	// @new_fence: where the database has no UPDATE … RETURNING to report
	// what a conditional write did (MySQL), the drawn token tells.
	drawFence string
	// statements replace recordSQL's statements of the same name.
	statements map[string]string
}

var (
	// PostgreSQL: statement_timestamp() is when the statement arrived (not
	// the transaction's start, which a stalled transaction would keep
	// old); fences come from a sequence.
	postgresRecords = recordDialect{
		now:        "(statement_timestamp() + CAST(@off AS interval))",
		plus:       "(statement_timestamp() + CAST(@off AS interval) + CAST(@%s AS interval))",
		nextFence:  "nextval('idempotency_records_fence_seq')",
		ageSeconds: "CAST(EXTRACT(EPOCH FROM (statement_timestamp() + CAST(@off AS interval) - %s)) AS DOUBLE PRECISION)",
		duration:   func(d time.Duration) string { return strconv.FormatInt(d.Microseconds(), 10) + " microseconds" },
		numbered:   true,
	}
	// SQLite: 'now' is fixed for one statement; times are UTC text with
	// milliseconds, one fixed width, so they compare as text; fences come
	// from idempotency_fence, advanced by the table's triggers.
	sqliteRecords = recordDialect{
		now:       "strftime('%Y-%m-%d %H:%M:%f', 'now', @off)",
		plus:      "strftime('%%Y-%%m-%%d %%H:%%M:%%f', 'now', @off, @%s)",
		nextFence: "(SELECT last + 1 FROM idempotency_fence WHERE id = 1)",
		// Both times have milliseconds; julianday's double (days since
		// 4714 BC) carries about 20 µs, so the difference is rounded back
		// to the millisecond (10 s would read 9.999986).
		ageSeconds: "round((julianday('now', @off) - julianday(%s)) * 86400.0, 3)",
		duration:   func(d time.Duration) string { return strconv.FormatFloat(d.Seconds(), 'f', 6, 64) + " seconds" },
	}
)

// gormRecordStore is the [RecordStore] of PostgreSQL and SQLite. Its SQL is
// built once from the dialect's spellings.
type gormRecordStore struct {
	d      recordDialect
	driver store.Driver
	offset func() time.Duration
	sql    map[string]string
	// numbered holds, on PostgreSQL, the hot statements (get, create) with
	// numbered placeholders, run without building a gorm statement.
	numbered map[string]numberedSQL
}

// numberedSQL is a statement of named arguments (@name) spelled with
// PostgreSQL's numbered placeholders: names[i] is the argument of $i+1.
type numberedSQL struct {
	sql   string
	names []string
}

// numberArgs spells sql's named arguments (@ and a name of letters,
// digits and underscores) as $1, $2, … (one number per name, however often
// it occurs).
func numberArgs(sql string) numberedSQL {
	var (
		b   strings.Builder
		out numberedSQL
		num = map[string]int{}
	)
	for i := 0; i < len(sql); i++ {
		if sql[i] != '@' {
			b.WriteByte(sql[i])
			continue
		}
		j := i + 1
		for j < len(sql) && nameByte(sql[j]) {
			j++
		}
		name := sql[i+1 : j]
		n, ok := num[name]
		if !ok {
			out.names = append(out.names, name)
			n = len(out.names)
			num[name] = n
		}
		b.WriteString("$" + strconv.Itoa(n))
		i = j - 1
	}
	out.sql = b.String()
	return out
}

// nameByte reports whether c continues an argument's name: a letter, a
// digit or an underscore.
func nameByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// values returns args in the order of the placeholders.
func (q numberedSQL) values(args map[string]any) []any {
	out := make([]any, len(q.names))
	for i, name := range q.names {
		out[i] = args[name]
	}
	return out
}

const recordColumns = `tenant_id, operation, idem_key, fingerprint, fingerprint_version, state, recovery_point,
    attempt, fence, locked_until, response_status, response_headers, response_body, response_truncated,
    resource_ref, error_code, created_at, updated_at, expires_at`

// claimColumns are the columns a claim sets; the response columns keep
// their defaults (NULL, FALSE).
const claimColumns = `tenant_id, operation, idem_key, fingerprint, fingerprint_version, state, recovery_point,
    attempt, fence, locked_until, created_at, updated_at, expires_at`

const pkWhere = "tenant_id = @tenant AND operation = @operation AND idem_key = @key"

// liveAttempt is the fence of every write of an attempt: its token is the
// record's and its lease is live on the database clock.
const liveAttempt = pkWhere + " AND fence = @fence AND state = 'in_progress' AND locked_until > {now}"

var recordSQL = map[string]string{
	// INSERT … SELECT … WHERE NOT EXISTS: a key that is held (the replay
	// path) draws no fence and attempts no insert; ON CONFLICT DO NOTHING
	// covers a concurrent insert of the same key.
	"insert": `INSERT INTO idempotency_records (` + claimColumns + `)
SELECT @tenant, @operation, @key, @fingerprint, CAST(@version AS {int}), 'in_progress', @point, 1,
    {next_fence}, {lease}, {now}, {now}, {ttl}
WHERE NOT EXISTS (SELECT 1 FROM idempotency_records WHERE ` + pkWhere + `)
ON CONFLICT (tenant_id, operation, idem_key) DO NOTHING
RETURNING fence, attempt`,
	"reclaim": `INSERT INTO idempotency_records (` + claimColumns + `)
VALUES (@tenant, @operation, @key, @fingerprint, CAST(@version AS {int}), 'in_progress', @point, 1,
    {next_fence}, {lease}, {now}, {now}, {ttl})
ON CONFLICT (tenant_id, operation, idem_key) DO UPDATE SET
    fingerprint = excluded.fingerprint,
    fingerprint_version = excluded.fingerprint_version,
    state = 'in_progress',
    recovery_point = excluded.recovery_point,
    attempt = idempotency_records.attempt + 1,
    fence = excluded.fence,
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
WHERE idempotency_records.state = 'completed' AND idempotency_records.expires_at <= {now}
RETURNING fence, attempt`,
	"get": `SELECT ` + recordColumns + `,
    CASE WHEN state = 'completed' AND expires_at <= {now} THEN 1 ELSE 0 END AS expired,
    CASE WHEN locked_until IS NOT NULL AND locked_until <= {now} THEN 1 ELSE 0 END AS lease_expired
FROM idempotency_records WHERE ` + pkWhere,
	"takeover": `UPDATE idempotency_records
SET state = 'in_progress', attempt = attempt + 1, fence = {next_fence}, locked_until = {lease}, updated_at = {now}
WHERE ` + pkWhere + ` AND fence = @fence AND state = @from AND (state = 'unknown' OR locked_until <= {now})
RETURNING fence, attempt`,
	"advance": `UPDATE idempotency_records
SET recovery_point = @point, resource_ref = COALESCE(@ref, resource_ref), locked_until = {lease}, updated_at = {now}
WHERE ` + liveAttempt,
	"renew": `UPDATE idempotency_records SET locked_until = {lease}, updated_at = {now}
WHERE ` + liveAttempt,
	"create": `INSERT INTO idempotency_records (` + claimColumns + `,
    response_status, response_headers, response_body, response_truncated, resource_ref, error_code)
VALUES (@tenant, @operation, @key, @fingerprint, CAST(@version AS {int}), 'completed', @point, 1,
    {next_fence}, NULL, {now}, {now}, {ttl}, @status, @headers, @body, @truncated, @ref, @code)`,
	"complete": `UPDATE idempotency_records
SET state = 'completed', locked_until = NULL, response_status = @status, response_headers = @headers,
    response_body = @body, response_truncated = @truncated, resource_ref = COALESCE(@ref, resource_ref),
    recovery_point = COALESCE(@point, recovery_point), error_code = @code, updated_at = {now}, expires_at = {ttl}
WHERE ` + liveAttempt,
	"unknown": `UPDATE idempotency_records SET state = 'unknown', locked_until = NULL, error_code = @code, updated_at = {now}
WHERE ` + liveAttempt,
	"release": `DELETE FROM idempotency_records WHERE ` + liveAttempt + ` AND recovery_point = @point`,
	"unfinished": `SELECT ` + recordColumns + `, 0 AS expired,
    CASE WHEN state = 'in_progress' THEN 1 ELSE 0 END AS lease_expired
FROM idempotency_records
WHERE (state = 'in_progress' AND locked_until <= {now}) OR state = 'unknown'
ORDER BY updated_at LIMIT @limit`,
	// The batch is a derived table inside IN, which MySQL accepts where it
	// refuses LIMIT in an IN subquery.
	"delete_expired": `DELETE FROM idempotency_records
WHERE state = 'completed' AND expires_at <= {now} AND (tenant_id, operation, idem_key) IN (
    SELECT tenant_id, operation, idem_key FROM (SELECT tenant_id, operation, idem_key FROM idempotency_records
    WHERE state = 'completed' AND expires_at <= {now}
    ORDER BY expires_at LIMIT @limit) batch)`,
	"list": `SELECT ` + recordColumns + `,
    CASE WHEN state = 'completed' AND expires_at <= {now} THEN 1 ELSE 0 END AS expired,
    CASE WHEN locked_until IS NOT NULL AND locked_until <= {now} THEN 1 ELSE 0 END AS lease_expired
FROM idempotency_records
WHERE (@tenant = '' OR tenant_id = @tenant) AND (@operation = '' OR operation = @operation)
    AND (@state = '' OR state = @state) AND created_at <= {older}
ORDER BY created_at, tenant_id, operation, idem_key LIMIT @limit`,
	"count_expired": `SELECT count(*) FROM idempotency_records WHERE state = 'completed' AND expires_at <= {now}`,
	"audit": `INSERT INTO idempotency_resolutions (tenant_id, operation, key_hash, fence, from_state, outcome, status,
    reference, error_code, actor, reason, resolved_at)
VALUES (@tenant, @operation, @key_hash, @fence, @from, @outcome, @status, @ref, @code, @actor, @reason, {now})`,
	"stats": `SELECT
    (SELECT {age_of_oldest} FROM idempotency_records WHERE state = 'in_progress') AS oldest_seconds,
    (SELECT count(*) FROM idempotency_records WHERE state = 'unknown') AS unknown`,
}

func newGormRecordStore(d recordDialect, driver store.Driver, offset func() time.Duration) *gormRecordStore {
	r := strings.NewReplacer(
		"{now}", d.now,
		"{lease}", fmt.Sprintf(d.plus, "lease"),
		"{ttl}", fmt.Sprintf(d.plus, "ttl"),
		"{older}", fmt.Sprintf(d.plus, "older"),
		"{next_fence}", d.nextFence,
		"{int}", cmp.Or(d.integer, "INTEGER"),
		"{age_of_oldest}", fmt.Sprintf(d.ageSeconds, "MIN(created_at)"),
	)
	s := &gormRecordStore{d: d, driver: driver, offset: offset, sql: map[string]string{}}
	for name, q := range recordSQL {
		s.sql[name] = r.Replace(q)
	}
	for name, q := range d.statements {
		s.sql[name] = r.Replace(q)
	}
	if d.numbered {
		s.numbered = map[string]numberedSQL{"get": numberArgs(s.sql["get"]), "create": numberArgs(s.sql["create"])}
	}
	return s
}

// args returns the named arguments of one statement: the clock offset and
// the record's key, plus more.
func (s *gormRecordStore) args(id RecordID, more map[string]any) map[string]any {
	var off time.Duration
	if s.offset != nil {
		off = s.offset()
	}
	args := map[string]any{"off": s.d.duration(off), "tenant": id.Tenant, "operation": id.Operation, "key": id.Key}
	for k, v := range more {
		args[k] = v
	}
	return args
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// returning runs a statement with RETURNING fence, attempt.
// returning runs a claim statement (… RETURNING attempt, fence). It is
// often the first statement of its transaction: pipeline.Find sends it with
// the transaction's BEGIN on PostgreSQL.
func (s *gormRecordStore) returning(ctx context.Context, db *gorm.DB, name string, args map[string]any) (Claim, bool, error) {
	var rows []Claim
	if err := pipeline.Find(db.WithContext(ctx), func(q *gorm.DB) *gorm.DB {
		return q.Raw(s.sql[name], args).Find(&rows)
	}).Error; err != nil || len(rows) == 0 {
		return Claim{}, false, err
	}
	return rows[0], true, nil
}

func (s *gormRecordStore) exec(ctx context.Context, db *gorm.DB, name string, args map[string]any) (int64, error) {
	res := db.WithContext(ctx).Exec(s.sql[name], args)
	return res.RowsAffected, res.Error
}

func (s *gormRecordStore) claimArgs(p ClaimParams) map[string]any {
	return s.args(p.ID, map[string]any{"fingerprint": p.Fingerprint, "version": p.FingerprintVersion,
		"point": PointStarted, "lease": s.d.duration(p.Lease), "ttl": s.d.duration(p.TTL)})
}

// Insert: a concurrent insert of the key that commits first makes the
// statement fail with a unique violation where the database has no ON
// CONFLICT DO NOTHING (MySQL, where InnoDB then rolls back that statement
// alone): the key is held, as when the statement inserts nothing.
func (s *gormRecordStore) Insert(ctx context.Context, db *gorm.DB, p ClaimParams) (Claim, bool, error) {
	c, ok, err := s.returning(ctx, db, "insert", s.claimArgs(p))
	if err != nil && errors.Is(s.driver.Classify(err), store.ErrUniqueViolation) {
		return Claim{}, false, nil
	}
	return c, ok, err
}

func (s *gormRecordStore) Reclaim(ctx context.Context, db *gorm.DB, p ClaimParams) (Claim, bool, error) {
	args := s.claimArgs(p)
	if s.d.drawFence == "" {
		return s.returning(ctx, db, "reclaim", args)
	}
	fence, err := s.draw(ctx, db, args)
	if err != nil {
		return Claim{}, false, err
	}
	// The statement returns the row as it left it: reclaimed when it
	// carries the drawn token.
	c, ok, err := s.returning(ctx, db, "reclaim", args)
	return c, ok && c.Fence == fence, err
}

// draw draws a fence token into args["new_fence"] (see drawFence).
func (s *gormRecordStore) draw(ctx context.Context, db *gorm.DB, args map[string]any) (int64, error) {
	var fence int64
	if err := db.WithContext(ctx).Raw(s.d.drawFence).Scan(&fence).Error; err != nil {
		return 0, err
	}
	args["new_fence"] = fence
	return fence, nil
}

func (s *gormRecordStore) Get(ctx context.Context, db *gorm.DB, id RecordID) (Record, bool, error) {
	if q, ok := s.numbered["get"]; ok {
		return s.getNumbered(ctx, db, q, s.args(id, nil))
	}
	var rows []recordRow
	if err := db.WithContext(ctx).Raw(s.sql["get"], s.args(id, nil)).Find(&rows).Error; err != nil || len(rows) == 0 {
		return Record{}, false, err
	}
	return rows[0].record(), true, nil
}

func (s *gormRecordStore) Takeover(ctx context.Context, db *gorm.DB, p TakeoverParams) (Claim, bool, error) {
	args := s.args(p.ID, map[string]any{"fence": p.Fence, "from": string(p.From), "lease": s.d.duration(p.Lease)})
	if s.d.drawFence == "" {
		return s.returning(ctx, db, "takeover", args)
	}
	if _, err := s.draw(ctx, db, args); err != nil {
		return Claim{}, false, err
	}
	if n, err := s.exec(ctx, db, "takeover", args); err != nil || n != 1 {
		return Claim{}, false, err
	}
	// The row the takeover wrote, read by its new token (the row lock the
	// update took keeps it as written until the transaction ends).
	return s.returning(ctx, db, "taken_over", args)
}

func (s *gormRecordStore) Advance(ctx context.Context, db *gorm.DB, p AdvanceParams) (bool, error) {
	n, err := s.exec(ctx, db, "advance", s.args(p.ID, map[string]any{"fence": p.Fence, "point": p.Point,
		"ref": nullable(p.Ref), "lease": s.d.duration(p.Lease)}))
	return n == 1, err
}

func (s *gormRecordStore) Renew(ctx context.Context, db *gorm.DB, p RenewParams) (bool, error) {
	n, err := s.exec(ctx, db, "renew", s.args(p.ID, map[string]any{"fence": p.Fence, "lease": s.d.duration(p.Lease)}))
	return n == 1, err
}

func (s *gormRecordStore) Complete(ctx context.Context, db *gorm.DB, p CompleteParams) (bool, error) {
	args, err := s.outcomeArgs(p)
	if err != nil {
		return false, err
	}
	args["fence"], args["point"] = p.Fence, nullable(p.Point)
	n, err := s.exec(ctx, db, "complete", s.args(p.ID, args))
	return n == 1, err
}

// Create is pipelined on PostgreSQL (pipeline.Later): it travels with the
// transaction's COMMIT.
func (s *gormRecordStore) Create(ctx context.Context, db *gorm.DB, c ClaimParams, p CompleteParams) error {
	args, err := s.outcomeArgs(p)
	if err != nil {
		return err
	}
	point := p.Point
	if point == "" {
		point = PointStarted
	}
	args["fingerprint"], args["version"], args["point"] = c.Fingerprint, c.FingerprintVersion, point
	args = s.args(c.ID, args)
	if q, ok := s.numbered["create"]; ok && pipeline.Pipelined(db) {
		return pipeline.LaterSQL(db, q.sql, q.values(args), s.keyTaken)
	}
	return pipeline.Later(db.WithContext(ctx), func(q *gorm.DB) *gorm.DB { return q.Exec(s.sql["create"], args) }, s.keyTaken)
}

// getNumbered is Get on PostgreSQL: the statement as spelled and the row
// scanned column by column, reported to db's gorm logger as gorm would.
func (s *gormRecordStore) getNumbered(ctx context.Context, db *gorm.DB, q numberedSQL, args map[string]any) (rec Record, found bool, err error) {
	start := time.Now()
	defer func() {
		var n int64
		if found {
			n = 1
		}
		db.Logger.Trace(ctx, start, func() (string, int64) { return q.sql, n }, err)
	}()
	rows, err := db.Statement.ConnPool.QueryContext(ctx, q.sql, q.values(args)...)
	if err != nil {
		return Record{}, false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return Record{}, false, rows.Err()
	}
	var r recordRow
	if err := rows.Scan(&r.TenantID, &r.Operation, &r.IdemKey, &r.Fingerprint, &r.FingerprintVersion, &r.State,
		&r.RecoveryPoint, &r.Attempt, &r.Fence, &r.LockedUntil, &r.ResponseStatus, &r.ResponseHeaders,
		&r.ResponseBody, &r.ResponseTruncated, &r.ResourceRef, &r.ErrorCode, &r.CreatedAt, &r.UpdatedAt,
		&r.ExpiresAt, &r.Expired, &r.LeaseExpired); err != nil {
		return Record{}, false, err
	}
	return r.record(), true, rows.Close()
}

// outcomeArgs are the statement arguments of p's outcome.
func (s *gormRecordStore) outcomeArgs(p CompleteParams) (map[string]any, error) {
	header, err := json.Marshal(p.Header)
	if err != nil {
		return nil, err
	}
	body := p.Body
	if body == nil && !p.Truncated {
		body = []byte{}
	}
	if p.Truncated {
		body = nil
	}
	return map[string]any{"status": p.Status, "headers": string(header), "body": body, "truncated": p.Truncated,
		"ref": nullable(p.Ref), "code": nullable(p.ErrorCode), "ttl": s.d.duration(p.TTL)}, nil
}

// keyTaken wraps err with ErrKeyTaken when the records' primary key refused
// the row (the driver's [store.ErrUniqueViolation]: the table has no other
// unique index).
func (s *gormRecordStore) keyTaken(err error) error {
	if err = s.driver.Classify(err); errors.Is(err, store.ErrUniqueViolation) {
		return errors.Join(ErrKeyTaken, err)
	}
	return err
}

func (s *gormRecordStore) MarkUnknown(ctx context.Context, db *gorm.DB, p MarkUnknownParams) (bool, error) {
	n, err := s.exec(ctx, db, "unknown", s.args(p.ID, map[string]any{"fence": p.Fence, "code": nullable(p.ErrorCode)}))
	return n == 1, err
}

func (s *gormRecordStore) Release(ctx context.Context, db *gorm.DB, p ReleaseParams) (bool, error) {
	n, err := s.exec(ctx, db, "release", s.args(p.ID, map[string]any{"fence": p.Fence, "point": PointStarted}))
	return n == 1, err
}

func (s *gormRecordStore) ListUnfinished(ctx context.Context, db *gorm.DB, limit int) ([]Record, error) {
	var rows []recordRow
	if err := db.WithContext(ctx).Raw(s.sql["unfinished"], s.args(RecordID{}, map[string]any{"limit": limit})).Find(&rows).Error; err != nil {
		return nil, err
	}
	recs := make([]Record, len(rows))
	for i := range rows {
		recs[i] = rows[i].record()
	}
	return recs, nil
}

func (s *gormRecordStore) DeleteExpired(ctx context.Context, db *gorm.DB, limit int) (int64, error) {
	return s.exec(ctx, db, "delete_expired", s.args(RecordID{}, map[string]any{"limit": limit}))
}

func (s *gormRecordStore) Stats(ctx context.Context, db *gorm.DB) (RecordStats, error) {
	var row struct {
		OldestSeconds *float64 `gorm:"column:oldest_seconds"`
		Unknown       int64    `gorm:"column:unknown"`
	}
	if err := db.WithContext(ctx).Raw(s.sql["stats"], s.args(RecordID{}, nil)).Find(&row).Error; err != nil {
		return RecordStats{}, err
	}
	stats := RecordStats{Unknown: row.Unknown}
	if row.OldestSeconds != nil {
		stats.OldestInProgress = max(0, time.Duration(*row.OldestSeconds*float64(time.Second)))
	}
	return stats, nil
}

func (s *gormRecordStore) List(ctx context.Context, db *gorm.DB, p ListParams) ([]Record, error) {
	if p.Limit <= 0 || p.OlderThan < 0 {
		return nil, errors.New("postkeys: List needs a positive Limit and a non-negative OlderThan")
	}
	var rows []recordRow
	args := s.args(RecordID{Tenant: p.Tenant, Operation: p.Operation}, map[string]any{"state": string(p.State),
		"older": s.d.duration(-p.OlderThan), "limit": p.Limit})
	if err := db.WithContext(ctx).Raw(s.sql["list"], args).Find(&rows).Error; err != nil {
		return nil, err
	}
	recs := make([]Record, len(rows))
	for i := range rows {
		recs[i] = rows[i].record()
	}
	return recs, nil
}

func (s *gormRecordStore) CountExpired(ctx context.Context, db *gorm.DB) (int64, error) {
	var n int64
	err := db.WithContext(ctx).Raw(s.sql["count_expired"], s.args(RecordID{}, nil)).Scan(&n).Error
	return n, err
}

func (s *gormRecordStore) Audit(ctx context.Context, db *gorm.DB, p AuditParams) error {
	_, err := s.exec(ctx, db, "audit", s.args(p.ID, map[string]any{"key_hash": framework.KeyHash(p.ID.Key), "fence": p.Fence,
		"from": string(p.From), "outcome": string(p.Outcome), "status": p.Status, "ref": nullable(p.Reference),
		"code": nullable(p.ErrorCode), "actor": p.Actor, "reason": p.Reason}))
	return err
}

// recordRow is the row shape of idempotency_records, with the flags Get
// computes on the database clock.
type recordRow struct {
	TenantID           string     `gorm:"column:tenant_id"`
	Operation          string     `gorm:"column:operation"`
	IdemKey            string     `gorm:"column:idem_key"`
	Fingerprint        string     `gorm:"column:fingerprint"`
	FingerprintVersion int        `gorm:"column:fingerprint_version"`
	State              string     `gorm:"column:state"`
	RecoveryPoint      string     `gorm:"column:recovery_point"`
	Attempt            int64      `gorm:"column:attempt"`
	Fence              int64      `gorm:"column:fence"`
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
	Expired            int        `gorm:"column:expired"`
	LeaseExpired       int        `gorm:"column:lease_expired"`
}

func (r *recordRow) record() Record {
	rec := Record{Tenant: r.TenantID, Operation: r.Operation, Key: r.IdemKey, Fingerprint: r.Fingerprint,
		FingerprintVersion: r.FingerprintVersion, State: State(r.State), RecoveryPoint: r.RecoveryPoint,
		Attempt: r.Attempt, Fence: r.Fence, ResponseBody: r.ResponseBody, Truncated: r.ResponseTruncated,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(), ExpiresAt: r.ExpiresAt.UTC(),
		Expired: r.Expired == 1, LeaseExpired: r.LeaseExpired == 1}
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
