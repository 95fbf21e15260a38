package framework

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
)

// Mode says what a PUT with a different body does to an existing resource.
type Mode int

const (
	// CreateOrReplace resources are replaced by a PUT with a different body
	// (while the replace guard allows it); version goes up by one.
	CreateOrReplace Mode = iota
	// CreateOnly resources are immutable: a PUT with a different body to an
	// existing ID is 422 idempotency_key_reuse.
	CreateOnly
)

// Meta is what the engine keeps about a resource besides its command.
type Meta struct {
	Tenant    string
	ID        uuid.UUID
	Version   int64
	Status    string
	CreatedAt time.Time
	UpdatedAt time.Time
}

// Resource declares a PUT resource over a command type T, the typed request
// body with validate tags (and optionally [Defaulter], [Checker],
// [Normalizer]).
type Resource[T any] struct {
	// Name is the URL segment and the operation name in fingerprints
	// ("orders"). Required.
	Name string
	// Singular names one resource in problem details ("no such order").
	// Defaults to Name without a trailing "s".
	Singular string
	// Table is the resource table, which has the engine's column shape (see
	// the migrations). Defaults to Name.
	Table string
	// BasePath is the path the collection is mounted under, used for
	// Location headers. Defaults to "/v1/" + Name.
	BasePath string
	// Mode is CreateOrReplace or CreateOnly. Defaults to CreateOrReplace.
	Mode Mode
	// InitialStatus is the status of a new resource. Defaults to "active".
	InitialStatus string
	// RenderFunc builds the representation from the stored command and its
	// metadata. Required.
	RenderFunc func(cmd T, m Meta) any
	// ReplaceGuardFunc, when set, is asked before a replace; an error (for
	// example [ErrResourceLocked]) refuses it. Runs under the row lock.
	ReplaceGuardFunc func(m Meta) error
	// OnCreateFunc, when set, runs inside the insert's transaction, only
	// when the insert happened: outbox events and audit rows written on tx
	// commit or roll back with the resource.
	OnCreateFunc func(ctx context.Context, tx *gorm.DB, cmd T, m Meta) error
	// SemanticHeaders names request headers that change the meaning of a
	// command (an API version, say); their values join the fingerprint.
	SemanticHeaders []string
	// Volatile lists dotted JSON paths of command fields left out of the
	// fingerprint.
	Volatile []string
}

// Collection serves one [Resource] on an [Engine].
type Collection[T any] struct {
	engine *Engine
	res    Resource[T]
}

// NewCollection validates r and returns its collection.
func NewCollection[T any](e *Engine, r Resource[T]) (*Collection[T], error) {
	if e == nil {
		return nil, errors.New("framework: NewCollection needs an engine")
	}
	if r.Name == "" || strings.ContainsAny(r.Name, "/ ") {
		return nil, fmt.Errorf("framework: resource name %q is not a path segment", r.Name)
	}
	if r.RenderFunc == nil {
		return nil, fmt.Errorf("framework: resource %q has no RenderFunc", r.Name)
	}
	if r.Mode != CreateOrReplace && r.Mode != CreateOnly {
		return nil, fmt.Errorf("framework: resource %q has an unknown mode", r.Name)
	}
	if r.Singular == "" {
		r.Singular = strings.TrimSuffix(r.Name, "s")
	}
	if r.Table == "" {
		r.Table = r.Name
	}
	if r.BasePath == "" {
		r.BasePath = "/v1/" + r.Name
	}
	if r.InitialStatus == "" {
		r.InitialStatus = "active"
	}
	return &Collection[T]{engine: e, res: r}, nil
}

// row is the engine's column shape of every resource table.
type row struct {
	TenantID          string     `gorm:"column:tenant_id;primaryKey"`
	ID                string     `gorm:"column:id;primaryKey"`
	Version           int64      `gorm:"column:version"`
	Status            string     `gorm:"column:status"`
	Body              string     `gorm:"column:body"`
	CreateFingerprint string     `gorm:"column:create_fingerprint"`
	Fingerprint       string     `gorm:"column:fingerprint"`
	CreatedAt         time.Time  `gorm:"column:created_at"`
	UpdatedAt         time.Time  `gorm:"column:updated_at"`
	DeletedAt         *time.Time `gorm:"column:deleted_at"`
}

func (r *row) meta() (Meta, error) {
	id, err := uuid.Parse(r.ID)
	if err != nil {
		return Meta{}, err
	}
	return Meta{Tenant: r.TenantID, ID: id, Version: r.Version, Status: r.Status,
		CreatedAt: r.CreatedAt.UTC(), UpdatedAt: r.UpdatedAt.UTC()}, nil
}

// etag is strong: it changes with every write (version) and differs between
// incarnations of one ID (fingerprint prefix).
func (r *row) etag() string {
	fp := r.Fingerprint
	if i := strings.IndexByte(fp, ':'); i >= 0 && len(fp) >= i+9 {
		fp = fp[i+1 : i+9]
	}
	return `"` + strconv.FormatInt(r.Version, 10) + "-" + fp + `"`
}

// PutRequest is one PUT of a command to a resource ID.
type PutRequest[T any] struct {
	Tenant  string
	ID      uuid.UUID
	Command T
	// Header carries the conditional headers (If-Match, If-None-Match) and
	// the resource's semantic headers.
	Header http.Header
	// keyReuse turns an If-None-Match mismatch into 422 (legacy POST).
	keyReuse bool
}

// Result is the outcome of a write: what [WriteReply] sends.
type Result struct {
	Status   int
	Body     []byte
	ETag     string
	Location string
	Replayed bool
	// Outcome is OutcomeExecuted (inserted or replaced), OutcomeReplayed
	// (same request within the replay window) or OutcomeConverged (same
	// request after it): nothing was written unless it is OutcomeExecuted.
	Outcome string
}

func (c *Collection[T]) location(id uuid.UUID) string { return c.res.BasePath + "/" + id.String() }

func (c *Collection[T]) fingerprint(req PutRequest[T]) (Fingerprint, error) {
	return ComputeFingerprint(FingerprintInput{
		Tenant: req.Tenant, Operation: c.res.Name,
		PathParams: map[string]string{"id": req.ID.String()},
		Headers:    SemanticHeaders(req.Header, c.res.SemanticHeaders), Command: req.Command, Volatile: c.res.Volatile,
	})
}

// Put creates, converges on or replaces the resource in its own transaction.
func (c *Collection[T]) Put(ctx context.Context, req PutRequest[T]) (Result, error) {
	var res Result
	err := c.engine.db.Write(ctx, func(tx *gorm.DB) error {
		var err error
		res, err = c.PutTx(ctx, tx, req)
		return err
	})
	return res, err
}

// PutTx is [Collection.Put] inside the caller's transaction tx, so that the
// caller's own rows commit together with the resource.
func (c *Collection[T]) PutTx(ctx context.Context, tx *gorm.DB, req PutRequest[T]) (Result, error) {
	if req.ID == uuid.Nil {
		return Result{}, Errorf(CodeInvalidResourceID, "the resource ID must be a non-nil UUID")
	}
	fp, err := c.fingerprint(req)
	if err != nil {
		return Result{}, err
	}
	body, err := json.Marshal(req.Command)
	if err != nil {
		return Result{}, err
	}
	ifMatch := req.Header.Get("If-Match")
	ifNoneMatchStar := strings.TrimSpace(req.Header.Get("If-None-Match")) == "*"
	now := c.engine.Now()
	tx = tx.WithContext(ctx)

	// Replays, convergence and refusals only read: the row is locked (SELECT
	// … FOR UPDATE) only once a replace is decided, and then re-evaluated
	// under the lock. A replayed PUT thus writes nothing, not even a lock.
	locked, purged := false, false
	for range 4 {
		if ifMatch == "" && !locked {
			fresh := row{TenantID: req.Tenant, ID: req.ID.String(), Version: 1, Status: c.res.InitialStatus,
				Body: string(body), CreateFingerprint: fp.String(), Fingerprint: fp.String(), CreatedAt: now, UpdatedAt: now}
			ins := tx.Table(c.res.Table).Clauses(clause.OnConflict{DoNothing: true}).Create(&fresh)
			if ins.Error != nil {
				return Result{}, ins.Error
			}
			if ins.RowsAffected == 1 {
				return c.created(ctx, tx, req, &fresh)
			}
		}
		q := tx.Table(c.res.Table)
		if locked {
			q = c.engine.db.Dialect.LockRow(q)
		}
		var cur row
		err := q.Where("tenant_id = ? AND id = ?", req.Tenant, req.ID.String()).Take(&cur).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			if ifMatch != "" {
				return Result{}, Errorf(CodePreconditionFailed, "If-Match given but the resource does not exist")
			}
			locked = false // an expired tombstone was purged meanwhile: insert again
			continue
		}
		if err != nil {
			return Result{}, err
		}
		if cur.DeletedAt != nil {
			if c.engine.retention.TombstoneLive(*cur.DeletedAt, now) || purged {
				return Result{}, Errorf(CodeResourceDeleted, "the resource was deleted; its ID cannot be used again")
			}
			// The tombstone is past retention: the ID is free again.
			if err := tx.Table(c.res.Table).Where("tenant_id = ? AND id = ? AND deleted_at IS NOT NULL", req.Tenant, req.ID.String()).
				Delete(&row{}).Error; err != nil {
				return Result{}, err
			}
			purged, locked = true, false
			continue
		}
		res, err := c.existing(ctx, tx, req, fp, body, ifMatch, ifNoneMatchStar, &cur, now, locked)
		if errors.Is(err, errNeedsLock) {
			locked = true
			continue
		}
		return res, err
	}
	return Result{}, Errorf(CodeRequestInProgress, "the resource changed concurrently; retry")
}

// errNeedsLock asks PutTx to read the row again under a row lock.
var errNeedsLock = errors.New("framework: replace needs the row lock")

func (c *Collection[T]) created(ctx context.Context, tx *gorm.DB, req PutRequest[T], r *row) (Result, error) {
	m, err := r.meta()
	if err != nil {
		return Result{}, err
	}
	if c.res.OnCreateFunc != nil {
		if err := c.res.OnCreateFunc(ctx, tx, req.Command, m); err != nil {
			return Result{}, err
		}
	}
	return c.result(http.StatusCreated, req.Command, r, false, OutcomeExecuted)
}

func (c *Collection[T]) existing(ctx context.Context, tx *gorm.DB, req PutRequest[T], fp Fingerprint, body []byte,
	ifMatch string, ifNoneMatchStar bool, cur *row, now time.Time, locked bool) (Result, error) {
	stored, err := c.decode(cur)
	if err != nil {
		return Result{}, err
	}
	same := cur.Fingerprint == fp.String()
	switch {
	case ifNoneMatchStar:
		if cur.CreateFingerprint == fp.String() {
			return c.result(http.StatusCreated, stored, cur, true, OutcomeReplayed)
		}
		if req.keyReuse {
			return Result{}, Errorf(CodeIdempotencyKeyReuse, "this key was used with a different request")
		}
		return Result{}, Errorf(CodePreconditionFailed, "If-None-Match: * given but the resource exists with a different creating request")
	case ifMatch != "" && !etagMatches(ifMatch, cur.etag()):
		return Result{}, Errorf(CodePreconditionFailed, "If-Match does not match the current ETag %s", cur.etag())
	case same:
		switch {
		case cur.Version == 1 && c.engine.retention.InReplayWindow(cur.CreatedAt, now):
			return c.result(http.StatusCreated, stored, cur, true, OutcomeReplayed)
		case c.engine.retention.InReplayWindow(cur.UpdatedAt, now):
			return c.result(http.StatusOK, stored, cur, true, OutcomeReplayed)
		default:
			return c.result(http.StatusOK, stored, cur, false, OutcomeConverged)
		}
	case c.res.Mode == CreateOnly:
		return Result{}, Errorf(CodeIdempotencyKeyReuse, "the resource exists with a different body and cannot be replaced")
	case !locked:
		return Result{}, errNeedsLock
	}
	m, err := cur.meta()
	if err != nil {
		return Result{}, err
	}
	if c.res.ReplaceGuardFunc != nil {
		if err := c.res.ReplaceGuardFunc(m); err != nil {
			return Result{}, err
		}
	}
	next := *cur
	next.Version, next.Body, next.Fingerprint, next.UpdatedAt = cur.Version+1, string(body), fp.String(), now
	upd := tx.Table(c.res.Table).Where("tenant_id = ? AND id = ? AND version = ?", cur.TenantID, cur.ID, cur.Version).
		Updates(map[string]any{"version": next.Version, "body": next.Body, "fingerprint": next.Fingerprint, "updated_at": now})
	if upd.Error != nil {
		return Result{}, upd.Error
	}
	if upd.RowsAffected != 1 {
		return Result{}, Errorf(CodeRequestInProgress, "the resource changed concurrently")
	}
	return c.result(http.StatusOK, req.Command, &next, false, OutcomeExecuted)
}

func (c *Collection[T]) decode(r *row) (T, error) {
	var cmd T
	err := json.Unmarshal([]byte(r.Body), &cmd)
	return cmd, err
}

func (c *Collection[T]) result(status int, cmd T, r *row, replayed bool, outcome string) (Result, error) {
	m, err := r.meta()
	if err != nil {
		return Result{}, err
	}
	body, err := json.Marshal(c.res.RenderFunc(cmd, m))
	if err != nil {
		return Result{}, err
	}
	res := Result{Status: status, Body: body, ETag: r.etag(), Replayed: replayed, Outcome: outcome}
	if status == http.StatusCreated {
		res.Location = c.location(m.ID)
	}
	return res, nil
}

// etagMatches evaluates an If-Match field value (a list of strong ETags or *).
func etagMatches(field, current string) bool {
	for tag := range strings.SplitSeq(field, ",") {
		tag = strings.TrimSpace(tag)
		if tag == "*" || tag == current {
			return true
		}
	}
	return false
}

// Get returns the live resource's representation and ETag.
func (c *Collection[T]) Get(ctx context.Context, tenant string, id uuid.UUID) (Result, error) {
	var r row
	err := c.engine.db.Gorm.WithContext(ctx).Table(c.res.Table).
		Where("tenant_id = ? AND id = ? AND deleted_at IS NULL", tenant, id.String()).Take(&r).Error
	if errors.Is(err, gorm.ErrRecordNotFound) {
		return Result{}, Errorf(CodeNotFound, "no such %s", c.res.Singular)
	}
	if err != nil {
		return Result{}, c.engine.db.Classify(err)
	}
	cmd, err := c.decode(&r)
	if err != nil {
		return Result{}, err
	}
	return c.result(http.StatusOK, cmd, &r, false, "")
}

// Delete tombstones the resource: GET answers 404 from now on and a PUT to
// its ID 410 for the tombstone retention.
func (c *Collection[T]) Delete(ctx context.Context, tenant string, id uuid.UUID) error {
	now := c.engine.Now()
	res := c.engine.db.Gorm.WithContext(ctx).Table(c.res.Table).
		Where("tenant_id = ? AND id = ? AND deleted_at IS NULL", tenant, id.String()).
		Updates(map[string]any{"deleted_at": now, "updated_at": now, "version": gorm.Expr("version + 1")})
	if res.Error != nil {
		return c.engine.db.Classify(res.Error)
	}
	if res.RowsAffected == 0 {
		return Errorf(CodeNotFound, "no such %s", c.res.Singular)
	}
	c.engine.logger.LogAttrs(ctx, slog.LevelInfo, "resource deleted",
		slog.String("tenant", tenant), slog.String("resource", c.res.Name), slog.String("id", id.String()))
	return nil
}

// SetStatus moves a live resource to status (for example an order from
// draft to submitted), bumping its version. The replace guard sees the new
// status from then on.
func (c *Collection[T]) SetStatus(ctx context.Context, tenant string, id uuid.UUID, status string) (Result, error) {
	var out Result
	err := c.engine.db.Write(ctx, func(tx *gorm.DB) error {
		var r row
		err := c.engine.db.Dialect.LockRow(tx.Table(c.res.Table)).
			Where("tenant_id = ? AND id = ? AND deleted_at IS NULL", tenant, id.String()).Take(&r).Error
		if errors.Is(err, gorm.ErrRecordNotFound) {
			return Errorf(CodeNotFound, "no such %s", c.res.Singular)
		}
		if err != nil {
			return err
		}
		if r.Status != status {
			r.Status, r.Version, r.UpdatedAt = status, r.Version+1, c.engine.Now()
			if err := tx.Table(c.res.Table).Where("tenant_id = ? AND id = ?", tenant, r.ID).
				Updates(map[string]any{"status": r.Status, "version": r.Version, "updated_at": r.UpdatedAt}).Error; err != nil {
				return err
			}
		}
		cmd, err := c.decode(&r)
		if err != nil {
			return err
		}
		out, err = c.result(http.StatusOK, cmd, &r, false, "")
		return err
	})
	return out, err
}

// Page is one page of a list.
type Page struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// MaxPageSize bounds the limit of a list request.
const MaxPageSize = 100

// List returns up to limit live resources of tenant ordered by ID, starting
// after the position encoded in cursor ("" for the first page).
func (c *Collection[T]) List(ctx context.Context, tenant string, limit int, cursor string) (Page, error) {
	after := ""
	if cursor != "" {
		raw, err := base64.RawURLEncoding.DecodeString(cursor)
		id, perr := uuid.ParseBytes(raw)
		if err != nil || perr != nil {
			return Page{}, &Error{Code: CodeValidationFailed, Detail: "the cursor is not valid",
				Fields: []FieldError{{Field: "cursor", Reason: "invalid"}}}
		}
		after = id.String()
	}
	var rows []row
	q := c.engine.db.Gorm.WithContext(ctx).Table(c.res.Table).Where("tenant_id = ? AND deleted_at IS NULL", tenant)
	if after != "" {
		q = q.Where("id > ?", after)
	}
	if err := q.Order("id").Limit(limit + 1).Find(&rows).Error; err != nil {
		return Page{}, c.engine.db.Classify(err)
	}
	page := Page{Items: make([]json.RawMessage, 0, min(len(rows), limit))}
	for i := range rows {
		if i == limit {
			next := base64.RawURLEncoding.EncodeToString([]byte(rows[i-1].ID))
			page.NextCursor = &next
			break
		}
		cmd, err := c.decode(&rows[i])
		if err != nil {
			return Page{}, err
		}
		res, err := c.result(http.StatusOK, cmd, &rows[i], false, "")
		if err != nil {
			return Page{}, err
		}
		page.Items = append(page.Items, res.Body)
	}
	return page, nil
}
