package collection

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"
)

// render builds the JSON representation of m: [Resource.RenderFunc], or the
// default one.
func (c *Collection[Cmd, Model]) render(m *Model) ([]byte, error) {
	if c.res.RenderFunc != nil {
		return json.Marshal(c.res.RenderFunc(m))
	}
	fields, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return defaultRepresentation(any(m).(Row).SystemColumns(), fields), nil
}

// defaultRepresentation prepends the system fields to the model's own JSON
// object: {"id","status","version","created_at","updated_at", …fields}.
func defaultRepresentation(s *System, fields []byte) []byte {
	status, _ := json.Marshal(s.Status)
	b := make([]byte, 0, len(fields)+160)
	b = append(b, `{"id":"`...)
	b = append(b, s.ID.String()...)
	b = append(b, `","status":`...)
	b = append(b, status...)
	b = append(b, `,"version":`...)
	b = strconv.AppendInt(b, s.Version, 10)
	b = append(b, `,"created_at":"`...)
	b = s.CreatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, `","updated_at":"`...)
	b = s.UpdatedAt.AppendFormat(b, time.RFC3339Nano)
	b = append(b, '"')
	if len(fields) > 2 {
		b = append(b, ',')
		b = append(b, fields[1:]...)
	} else {
		b = append(b, '}')
	}
	return b
}

// Get returns the live resource's representation and ETag, read on the
// primary.
func (c *Collection[Cmd, Model]) Get(ctx context.Context, tenant string, id uuid.UUID) (Result, error) {
	return c.get(ctx, c.engine.DB().Gorm, tenant, id)
}

// get is Get on db: the primary's handle or the replica's.
func (c *Collection[Cmd, Model]) get(ctx context.Context, db *gorm.DB, tenant string, id uuid.UUID) (Result, error) {
	m := new(Model)
	found, err := c.read(ctx, db, store.RowReadParams{Key: c.key(tenant, id), Dest: m, LiveOnly: true, Preload: c.preload})
	if err != nil {
		return Result{}, c.engine.DB().Classify(err)
	}
	if !found {
		return Result{}, framework.Errorf(wire.CodeNotFound, "no such %s", c.res.Singular)
	}
	return c.current(m)
}

// current renders a row read from the database as a 200.
func (c *Collection[Cmd, Model]) current(m *Model) (Result, error) {
	sys := any(m).(Row).SystemColumns()
	sys.normalize()
	body, err := c.render(m)
	if err != nil {
		return Result{}, err
	}
	return Result{Status: http.StatusOK, Body: body, ETag: sys.ETag()}, nil
}

// Page is one page of a list.
type Page struct {
	Items      []json.RawMessage `json:"items"`
	NextCursor *string           `json:"next_cursor"`
}

// MaxPageSize bounds the limit of a list request.
const MaxPageSize = 100

// ListRequest asks for one page of a tenant's resources.
type ListRequest struct {
	Tenant string
	// Limit is the page size, 1 to [MaxPageSize].
	Limit int
	// Cursor is the next_cursor of the previous page, "" for the first.
	Cursor string
	// Filters maps columns named in [Resource.Filters] to the value they
	// must equal; other columns are refused.
	Filters map[string]string
}

// List returns a page of the tenant's live resources, newest first
// (created_at, then id, descending). The cursor is the position of the last
// item (keyset pagination), so rows inserted while a client pages never
// make it skip or repeat an item.
func (c *Collection[Cmd, Model]) List(ctx context.Context, req ListRequest) (Page, error) {
	return c.list(ctx, c.engine.DB().Gorm, req)
}

// list is List on db: the primary's handle or the replica's.
func (c *Collection[Cmd, Model]) list(ctx context.Context, db *gorm.DB, req ListRequest) (Page, error) {
	if req.Limit < 1 || req.Limit > MaxPageSize {
		return Page{}, &framework.Error{Code: wire.CodeValidationFailed, Detail: "limit must be an integer from 1 to " + strconv.Itoa(MaxPageSize),
			Fields: []wire.FieldError{{Field: "limit", Reason: "min=1,max=" + strconv.Itoa(MaxPageSize)}}}
	}
	p := store.RowListParams{Table: c.res.Table, Tenant: req.Tenant, Limit: req.Limit + 1, Preload: c.preload}
	for _, col := range c.res.Filters {
		if v, ok := req.Filters[col]; ok {
			if !server.Storable(v) {
				// No row can hold it; PostgreSQL would refuse the query.
				return Page{}, &framework.Error{Code: wire.CodeValidationFailed, Detail: "a filter value is not valid text",
					Fields: []wire.FieldError{{Field: col, Reason: "must be valid UTF-8 without NUL characters"}}}
			}
			p.Filters = append(p.Filters, store.RowFilter{Column: col, Value: v})
		}
	}
	if len(p.Filters) != len(req.Filters) {
		return Page{}, &framework.Error{Code: wire.CodeValidationFailed, Detail: "the list cannot be filtered on that field",
			Fields: []wire.FieldError{{Field: "filter", Reason: "one of " + strings.Join(c.res.Filters, ",")}}}
	}
	if req.Cursor != "" {
		pos, ok := decodeCursor(req.Cursor)
		if !ok {
			return Page{}, &framework.Error{Code: wire.CodeValidationFailed, Detail: "the cursor is not valid",
				Fields: []wire.FieldError{{Field: "cursor", Reason: "invalid"}}}
		}
		p.After = &pos
	}
	var rows []Model
	p.Dest = &rows
	if err := c.rows.List(ctx, db, p); err != nil {
		return Page{}, c.engine.DB().Classify(changedWhileRead(err))
	}
	page := Page{Items: make([]json.RawMessage, 0, min(len(rows), req.Limit))}
	for i := range rows {
		if i == req.Limit {
			last := any(&rows[i-1]).(Row).SystemColumns()
			next := encodeCursor(store.RowPosition{CreatedAt: last.CreatedAt, ID: last.ID})
			page.NextCursor = &next
			break
		}
		res, err := c.current(&rows[i])
		if err != nil {
			return Page{}, err
		}
		page.Items = append(page.Items, res.Body)
	}
	return page, nil
}

// encodeCursor writes a position as base64url("<unix microseconds>:<uuid>").
func encodeCursor(p store.RowPosition) string {
	raw := strconv.FormatInt(p.CreatedAt.UnixMicro(), 10) + ":" + p.ID.String()
	return base64.RawURLEncoding.EncodeToString([]byte(raw))
}

func decodeCursor(s string) (store.RowPosition, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		return store.RowPosition{}, false
	}
	micros, id, ok := strings.Cut(string(raw), ":")
	if !ok {
		return store.RowPosition{}, false
	}
	us, err := strconv.ParseInt(micros, 10, 64)
	uid, uerr := uuid.Parse(id)
	if err != nil || uerr != nil {
		return store.RowPosition{}, false
	}
	return store.RowPosition{CreatedAt: time.UnixMicro(us).UTC(), ID: uid}, true
}

// Reads from a replica ([store.DB.Replica]): GET, HEAD and list may be
// answered by a replica, as of a moment ago, within rules that keep a lag
// from making an answer wrong (docs/scaling.md, "Reads from replicas").

// getForRequest answers a GET or HEAD: from the replica when there is
// one, the request allows it (no Cache-Control: no-cache) and the
// replica's answer is not behind what the client shows it has seen; from
// the primary otherwise. A replica that has not seen the resource, or
// fails, is never the answer: the primary is read.
func (c *Collection[Cmd, Model]) getForRequest(g *gin.Context, tenant string, id uuid.UUID) (Result, error) {
	ctx := g.Request.Context()
	if !noCache(g) {
		var res Result
		err := c.engine.DB().ReadReplica(ctx, func(ctx context.Context, r *gorm.DB) (err error) {
			res, err = c.get(ctx, r, tenant, id)
			return err
		})
		if err == nil && !behind(g.GetHeader("If-None-Match"), res.ETag) {
			return res, nil
		}
	}
	return c.Get(ctx, tenant, id)
}

// listForRequest answers a list: from the replica when there is one and
// the request allows it, from the primary otherwise. A page from a
// replica is as of a moment ago; its cursor is a position (keyset), so
// the next page, from the replica or the primary, neither skips nor
// repeats an item of the first.
func (c *Collection[Cmd, Model]) listForRequest(g *gin.Context, req ListRequest) (Page, error) {
	ctx := g.Request.Context()
	if !noCache(g) {
		var page Page
		err := c.engine.DB().ReadReplica(ctx, func(ctx context.Context, r *gorm.DB) (err error) {
			page, err = c.list(ctx, r, req)
			return err
		})
		if err == nil {
			return page, nil
		}
	}
	// A request the list refuses is refused here alike, without a query.
	return c.List(ctx, req)
}

// noCache reports whether the request asks for the latest state
// (Cache-Control: no-cache or no-store, or Pragma: no-cache): it is
// read on the primary.
func noCache(g *gin.Context) bool {
	for _, v := range g.Request.Header.Values("Cache-Control") {
		for d := range strings.SplitSeq(v, ",") {
			if d = strings.ToLower(strings.TrimSpace(d)); d == "no-cache" || d == "no-store" {
				return true
			}
		}
	}
	return strings.EqualFold(strings.TrimSpace(g.GetHeader("Pragma")), "no-cache")
}

// behind reports whether a replica whose representation has ETag current
// may be behind a version named in the If-None-Match field: a tag of the
// same resource life (same creation stamp) with a higher version, or a tag
// the replica cannot order against its own (another life, another form).
// "*" and the current tag itself are not behind.
func behind(field, current string) bool {
	if field == "" {
		return false
	}
	cv, cc, ok := parseETag(current)
	if !ok {
		return true
	}
	for tag := range etagTags(field, true) {
		if tag == "*" || tag == current {
			continue
		}
		v, created, ok := parseETag(tag)
		if !ok || created != cc || v > cv {
			return true
		}
	}
	return false
}
