package recordsql

import (
	"cmp"
	"context"
	"errors"
	"strings"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// New returns the [store.Records] of the spelling s, whose driver
// classifies errors with classify (its [store.Driver.Classify]). Its SQL
// is built once, here.
func New(s Spelling, classify func(error) error) store.Records {
	now := s.Clock()
	r := strings.NewReplacer(
		"{now}", now,
		"{lease}", s.Clock("lease"),
		"{ttl}", s.Clock("ttl"),
		"{older}", s.Clock("older"),
		"{next_fence}", s.NextFence,
		"{int}", cmp.Or(s.Integer, "INTEGER"),
		"{age_of_oldest}", strings.NewReplacer("{now}", now, "{time}", "MIN(created_at)").Replace(s.AgeSeconds),
	)
	rs := &records{s: s, classify: classify, sql: map[string]string{}, named: map[string]bool{}}
	for name, q := range templates {
		rs.sql[name] = r.Replace(q)
	}
	for name, q := range s.Statements {
		rs.sql[name] = r.Replace(q)
	}
	for name, q := range rs.sql {
		rs.named[name] = strings.Contains(q, "@")
	}
	switch {
	case s.Numbered:
		rs.numbered = map[string]numberedSQL{"get": numberArgs(rs.sql["get"])}
	case s.Positional:
		rs.numbered = map[string]numberedSQL{"get": positionalArgs(rs.sql["get"])}
	}
	return rs
}

// records is [store.Records] on the SQL of one [Spelling].
type records struct {
	s        Spelling
	classify func(error) error
	sql      map[string]string
	// named tells the statements that name arguments: on the database
	// clock as it is, stats and count_expired name none.
	named map[string]bool
	// numbered holds, where the spelling says so, the hot read (get) with
	// numbered or positional placeholders, run without building a gorm
	// statement.
	numbered map[string]numberedSQL
}

var _ store.Records = (*records)(nil)

// args returns the named arguments of one statement: the record's key,
// plus more (and those the spelling binds, [Spelling.Bind]).
func (s *records) args(id store.RecordKey, more map[string]any) map[string]any {
	args := map[string]any{"tenant": id.Tenant, "operation": id.Operation, "key": id.Key}
	for k, v := range more {
		args[k] = v
	}
	if s.s.Bind != nil {
		s.s.Bind(args)
	}
	return args
}

// bound is the argument list of the statement name with the named
// arguments args: none when the statement names none, for gorm would take
// the map for a positional argument.
func (s *records) bound(name string, args map[string]any) []any {
	if !s.named[name] {
		return nil
	}
	return []any{args}
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// returning runs a claim statement (… RETURNING fence, attempt). It is
// often the first statement of its transaction: pipeline.Find sends it with
// the transaction's BEGIN on PostgreSQL.
func (s *records) returning(ctx context.Context, db *gorm.DB, name string, args map[string]any) (store.RecordClaim, bool, error) {
	var rows []store.RecordClaim
	if err := pipeline.Find(db.WithContext(ctx), func(q *gorm.DB) *gorm.DB {
		return q.Raw(s.sql[name], s.bound(name, args)...).Find(&rows)
	}).Error; err != nil || len(rows) == 0 {
		return store.RecordClaim{}, false, s.onKey(err)
	}
	return rows[0], true, nil
}

func (s *records) exec(ctx context.Context, db *gorm.DB, name string, args map[string]any) (int64, error) {
	res := db.WithContext(ctx).Exec(s.sql[name], s.bound(name, args)...)
	return res.RowsAffected, res.Error
}

// execOnKey is exec of a statement on one key's record: a wait past the
// lock timeout for it is the key's ([records.onKey]).
func (s *records) execOnKey(ctx context.Context, db *gorm.DB, name string, args map[string]any) (int64, error) {
	n, err := s.exec(ctx, db, name, args)
	return n, s.onKey(err)
}

// onKey marks err, the error of a statement on one key's record, when it
// is a wait past the lock timeout for that record: a concurrent request
// with the key holds it ([store.KeyLocked]). Other errors pass through
// unclassified.
func (s *records) onKey(err error) error {
	if err == nil {
		return nil
	}
	if c := s.classify(err); errors.Is(c, store.ErrLockTimeout) {
		return store.KeyLocked(c)
	}
	return err
}

func (s *records) claimArgs(p *store.RecordClaimParams) map[string]any {
	return s.args(p.ID, map[string]any{"fingerprint": p.Fingerprint, "version": p.FingerprintVersion,
		"point": p.Point, "lease": s.s.Duration(p.Lease), "ttl": s.s.Duration(p.TTL)})
}

// Insert: a concurrent insert of the key that commits first makes the
// statement fail with a unique violation where the database has no ON
// CONFLICT DO NOTHING (MySQL, where InnoDB then rolls back that statement
// alone): the key is held, as when the statement inserts nothing.
func (s *records) Insert(ctx context.Context, db *gorm.DB, p *store.RecordClaimParams) (store.RecordClaim, bool, error) {
	c, ok, err := s.returning(ctx, db, "insert", s.claimArgs(p))
	if err != nil && errors.Is(s.classify(err), store.ErrUniqueViolation) {
		return store.RecordClaim{}, false, nil
	}
	return c, ok, err
}

func (s *records) Reclaim(ctx context.Context, db *gorm.DB, p *store.RecordClaimParams) (store.RecordClaim, bool, error) {
	args := s.claimArgs(p)
	if s.s.DrawFence == "" {
		return s.returning(ctx, db, "reclaim", args)
	}
	fence, err := s.draw(ctx, db, args)
	if err != nil {
		return store.RecordClaim{}, false, err
	}
	// The statement returns the row as it left it: reclaimed when it
	// carries the drawn token.
	c, ok, err := s.returning(ctx, db, "reclaim", args)
	return c, ok && c.Fence == fence, err
}

// draw draws a fence token into args["new_fence"] (see
// [Spelling.DrawFence]).
func (s *records) draw(ctx context.Context, db *gorm.DB, args map[string]any) (int64, error) {
	var fence int64
	if err := db.WithContext(ctx).Raw(s.s.DrawFence).Scan(&fence).Error; err != nil {
		return 0, err
	}
	args["new_fence"] = fence
	return fence, nil
}

func (s *records) Get(ctx context.Context, db *gorm.DB, p *store.RecordGetParams) (store.RecordRow, bool, error) {
	if q, ok := s.numbered["get"]; ok {
		return s.getNumbered(ctx, db, q, s.args(p.ID, nil))
	}
	rows, err := db.WithContext(ctx).Raw(s.sql["get"], s.bound("get", s.args(p.ID, nil))...).Rows()
	if err != nil {
		return store.RecordRow{}, false, err
	}
	defer func() { _ = rows.Close() }()
	if !rows.Next() {
		return store.RecordRow{}, false, rows.Err()
	}
	var r recordRow
	var now store.DatabaseTime
	if err := rows.Scan(append(r.columns(), &now)...); err != nil {
		return store.RecordRow{}, false, err
	}
	r.judgeAt(now.Time)
	return r.row(), true, rows.Close()
}

// getNumbered is Get on a numbered or positional spelling (PostgreSQL,
// SQLite, the MySQL family): the statement
// as spelled and the row scanned column by column, reported to db's gorm
// logger as gorm would.
func (s *records) getNumbered(ctx context.Context, db *gorm.DB, q numberedSQL, args map[string]any) (row store.RecordRow, found bool, err error) {
	start := time.Now()
	defer func() {
		var n int64
		if found {
			n = 1
		}
		db.Logger.Trace(ctx, start, func() (string, int64) { return q.sql, n }, err)
	}()
	var r recordRow
	var now store.DatabaseTime
	dest := func([]string) []any { return append(r.columns(), &now) }
	found, err = store.QueryRow(ctx, s.s.Rows, db.Statement.ConnPool, q.sql, q.values(args), dest)
	if err != nil || !found {
		return store.RecordRow{}, false, err
	}
	r.judgeAt(now.Time)
	return r.row(), true, nil
}

func (s *records) Takeover(ctx context.Context, db *gorm.DB, p *store.RecordTakeoverParams) (store.RecordClaim, bool, error) {
	args := s.args(p.ID, map[string]any{"fence": p.Fence, "from": string(p.From), "lease": s.s.Duration(p.Lease)})
	if s.s.DrawFence == "" {
		return s.returning(ctx, db, "takeover", args)
	}
	if _, err := s.draw(ctx, db, args); err != nil {
		return store.RecordClaim{}, false, err
	}
	if n, err := s.execOnKey(ctx, db, "takeover", args); err != nil || n != 1 {
		return store.RecordClaim{}, false, err
	}
	// The row the takeover wrote, read by its new token (the row lock the
	// update took keeps it as written until the transaction ends).
	return s.returning(ctx, db, "taken_over", args)
}

func (s *records) Advance(ctx context.Context, db *gorm.DB, p *store.RecordAdvanceParams) (bool, error) {
	n, err := s.execOnKey(ctx, db, "advance", s.args(p.ID, map[string]any{"fence": p.Fence, "point": p.Point,
		"ref": nullable(p.Ref), "lease": s.s.Duration(p.Lease)}))
	return n == 1, err
}

func (s *records) Renew(ctx context.Context, db *gorm.DB, p *store.RecordRenewParams) (bool, error) {
	n, err := s.execOnKey(ctx, db, "renew", s.args(p.ID, map[string]any{"fence": p.Fence, "lease": s.s.Duration(p.Lease)}))
	return n == 1, err
}

func (s *records) Complete(ctx context.Context, db *gorm.DB, p *store.RecordCompleteParams) (bool, error) {
	args := s.outcomeArgs(&p.RecordOutcome)
	args["fence"], args["point"] = p.Fence, nullable(p.Point)
	n, err := s.execOnKey(ctx, db, "complete", s.args(p.ID, args))
	return n == 1, err
}

// outcomeArgs are the statement arguments of an outcome.
func (s *records) outcomeArgs(o *store.RecordOutcome) map[string]any {
	body := o.Body
	if body == nil && !o.Truncated {
		body = []byte{}
	}
	if o.Truncated {
		body = nil
	}
	return map[string]any{"status": o.Status, "headers": o.Headers, "body": body, "truncated": o.Truncated,
		"ref": nullable(o.Ref), "code": nullable(o.ErrorCode), "ttl": s.s.Duration(o.TTL)}
}

func (s *records) MarkUnknown(ctx context.Context, db *gorm.DB, p *store.RecordMarkUnknownParams) (bool, error) {
	n, err := s.execOnKey(ctx, db, "unknown", s.args(p.ID, map[string]any{"fence": p.Fence, "code": nullable(p.ErrorCode)}))
	return n == 1, err
}

func (s *records) Release(ctx context.Context, db *gorm.DB, p *store.RecordReleaseParams) (bool, error) {
	n, err := s.execOnKey(ctx, db, "release", s.args(p.ID, map[string]any{"fence": p.Fence, "point": p.Point}))
	return n == 1, err
}

func (s *records) ListUnfinished(ctx context.Context, db *gorm.DB, p *store.RecordListUnfinishedParams) ([]store.RecordRow, error) {
	return s.list(ctx, db, "unfinished", s.args(store.RecordKey{}, map[string]any{"limit": p.Limit}))
}

func (s *records) DeleteExpired(ctx context.Context, db *gorm.DB, p *store.RecordDeleteExpiredParams) (int64, error) {
	return s.exec(ctx, db, "delete_expired", s.args(store.RecordKey{}, map[string]any{"limit": p.Limit}))
}

func (s *records) Stats(ctx context.Context, db *gorm.DB) (store.RecordStats, error) {
	var row struct {
		OldestSeconds *float64 `gorm:"column:oldest_seconds"`
		Unknown       int64    `gorm:"column:unknown"`
	}
	if err := db.WithContext(ctx).Raw(s.sql["stats"], s.bound("stats", s.args(store.RecordKey{}, nil))...).Find(&row).Error; err != nil {
		return store.RecordStats{}, err
	}
	stats := store.RecordStats{Unknown: row.Unknown}
	if row.OldestSeconds != nil {
		stats.OldestInProgress = max(0, time.Duration(*row.OldestSeconds*float64(time.Second)))
	}
	return stats, nil
}

func (s *records) List(ctx context.Context, db *gorm.DB, p *store.RecordListParams) ([]store.RecordRow, error) {
	if p.Limit <= 0 || p.OlderThan < 0 {
		return nil, errors.New("store: Records.List needs a positive Limit and a non-negative OlderThan")
	}
	return s.list(ctx, db, "list", s.args(store.RecordKey{Tenant: p.Tenant, Operation: p.Operation},
		map[string]any{"state": string(p.State), "older": s.s.Duration(-p.OlderThan), "limit": p.Limit}))
}

// list runs the reading statement name and returns its rows.
func (s *records) list(ctx context.Context, db *gorm.DB, name string, args map[string]any) ([]store.RecordRow, error) {
	var rows []recordRow
	if err := db.WithContext(ctx).Raw(s.sql[name], s.bound(name, args)...).Find(&rows).Error; err != nil {
		return nil, err
	}
	out := make([]store.RecordRow, len(rows))
	for i := range rows {
		out[i] = rows[i].row()
	}
	return out, nil
}

func (s *records) CountExpired(ctx context.Context, db *gorm.DB) (int64, error) {
	var n int64
	err := db.WithContext(ctx).Raw(s.sql["count_expired"], s.bound("count_expired", s.args(store.RecordKey{}, nil))...).Scan(&n).Error
	return n, err
}

func (s *records) Audit(ctx context.Context, db *gorm.DB, p *store.RecordAuditParams) error {
	_, err := s.exec(ctx, db, "audit", s.args(store.RecordKey{Tenant: p.Tenant, Operation: p.Operation}, map[string]any{
		"key_hash": p.KeyHash, "fence": p.Fence, "from": string(p.From), "outcome": p.Outcome, "status": p.Status,
		"ref": nullable(p.Reference), "code": nullable(p.ErrorCode), "actor": p.Actor, "reason": p.Reason}))
	return err
}

func (s *records) PutOperation(ctx context.Context, db *gorm.DB, p *store.RecordOperation) error {
	_, err := s.exec(ctx, db, "put_operation", s.args(store.RecordKey{Operation: p.Operation}, map[string]any{"codes": p.Codes}))
	return err
}

func (s *records) GetOperation(ctx context.Context, db *gorm.DB, operation string) (store.RecordOperation, bool, error) {
	var rows []struct {
		Operation string    `gorm:"column:operation"`
		Codes     string    `gorm:"column:codes"`
		UpdatedAt time.Time `gorm:"column:updated_at"`
	}
	err := db.WithContext(ctx).Raw(s.sql["get_operation"], s.bound("get_operation", s.args(store.RecordKey{Operation: operation}, nil))...).Find(&rows).Error
	if err != nil || len(rows) == 0 {
		return store.RecordOperation{}, false, err
	}
	return store.RecordOperation{Operation: rows[0].Operation, Codes: rows[0].Codes, UpdatedAt: rows[0].UpdatedAt.UTC()}, true, nil
}

// recordRow is the row shape of idempotency_records as the reading
// statements return it, with the flags they compute on the database
// clock.
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

// columns are the destinations of the columns of a record, in the order
// [recordColumns] reads them.
func (r *recordRow) columns() []any {
	return []any{&r.TenantID, &r.Operation, &r.IdemKey, &r.Fingerprint, &r.FingerprintVersion, &r.State,
		&r.RecoveryPoint, &r.Attempt, &r.Fence, &r.LockedUntil, &r.ResponseStatus, &r.ResponseHeaders,
		&r.ResponseBody, &r.ResponseTruncated, &r.ResourceRef, &r.ErrorCode, &r.CreatedAt, &r.UpdatedAt,
		&r.ExpiresAt}
}

// judgeAt sets Expired and LeaseExpired as of now, the database clock
// read with the row, as "list" sets them in SQL: a completed record
// whose expires_at is not after now has expired, and a lease whose
// locked_until is not after now has ended.
func (r *recordRow) judgeAt(now time.Time) {
	r.Expired, r.LeaseExpired = 0, 0
	if r.State == "completed" && !r.ExpiresAt.After(now) {
		r.Expired = 1
	}
	if r.LockedUntil != nil && !r.LockedUntil.After(now) {
		r.LeaseExpired = 1
	}
}

func (r *recordRow) row() store.RecordRow {
	row := store.RecordRow{ID: store.RecordKey{Tenant: r.TenantID, Operation: r.Operation, Key: r.IdemKey},
		Fingerprint: r.Fingerprint, FingerprintVersion: r.FingerprintVersion, State: store.RecordState(r.State),
		RecoveryPoint: r.RecoveryPoint, Attempt: r.Attempt, Fence: r.Fence, ResponseBody: r.ResponseBody,
		Truncated: r.ResponseTruncated, CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC(),
		ExpiresAt: r.ExpiresAt.UTC(), Expired: r.Expired == 1, LeaseExpired: r.LeaseExpired == 1}
	if r.LockedUntil != nil {
		row.LockedUntil = r.LockedUntil.UTC()
	}
	if r.ResponseStatus != nil {
		row.ResponseStatus = *r.ResponseStatus
	}
	if r.ResponseHeaders != nil {
		row.ResponseHeaders = *r.ResponseHeaders
	}
	if r.ResourceRef != nil {
		row.ResourceRef = *r.ResourceRef
	}
	if r.ErrorCode != nil {
		row.ErrorCode = *r.ErrorCode
	}
	return row
}
