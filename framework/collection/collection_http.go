package collection

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/telemetry"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// Mount registers the collection's routes on g, which must already run
// [RequireAuth]:
//
//	PUT    /{name}/:id   create, converge or replace (If-Match, If-None-Match: *)
//	PATCH  /{name}/:id   merge patch or JSON Patch, written as a replace (If-Match);
//	                     on a create-only resource 405 method_not_allowed
//	GET    /{name}/:id   the representation and its ETag (If-None-Match → 304)
//	HEAD   /{name}/:id   the same without a body
//	DELETE /{name}/:id   tombstone (If-Match)
//	GET    /{name}       a page of the tenant's resources, newest first,
//	HEAD   /{name}       filtered by the resource's Filters (?status=draft)
//
// A create-only resource's PATCH is answered by the collection itself,
// 405 with Allow: PUT, GET, HEAD, DELETE, whether or not the router
// answers 405 for methods it has no route for (server.UseProblemHandlers);
// on a router that does, the Allow of another refused method (POST)
// lists PATCH as well.
func (c *Collection[Cmd, Model]) Mount(g gin.IRouter) {
	base := "/" + c.res.Name
	g.PUT(base+"/:id", c.handlePut)
	if c.res.Mode == CreateOrReplace {
		g.PATCH(base+"/:id", c.handlePatch)
	} else {
		g.PATCH(base+"/:id", c.refusePatch)
	}
	g.GET(base+"/:id", c.handleGet)
	g.HEAD(base+"/:id", c.handleGet)
	g.DELETE(base+"/:id", c.handleDelete)
	g.GET(base, c.handleList)
	g.HEAD(base, c.handleList)
}

// ResourceID parses the :id path parameter as a non-nil UUID.
func ResourceID(c *gin.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil || id == uuid.Nil {
		return uuid.Nil, framework.Errorf(wire.CodeInvalidResourceID, "the resource ID must be a non-nil UUID")
	}
	return id, nil
}

func (c *Collection[Cmd, Model]) fail(g *gin.Context, pattern string, err error) {
	if pattern == "" {
		c.engine.WriteProblem(g.Writer, g.Request, err)
		return
	}
	c.engine.WriteFailure(g.Writer, g.Request, pattern, c.res.Name, "", err)
}

func (c *Collection[Cmd, Model]) handlePut(g *gin.Context) {
	start := time.Now()
	tenant, id, ok := c.target(g, "put")
	if !ok {
		return
	}
	c.serveCreate(g, "put", start, PutRequest[Cmd]{Tenant: tenant, ID: id, Header: g.Request.Header}, "")
}

// target reads the authenticated tenant and the :id of a request, or
// answers 401 or 400 and reports false.
func (c *Collection[Cmd, Model]) target(g *gin.Context, pattern string) (string, uuid.UUID, bool) {
	tenant, ok := server.Tenant(g, c.engine.Logger())
	if !ok {
		return "", uuid.Nil, false
	}
	id, err := ResourceID(g)
	if err != nil {
		c.fail(g, pattern, err)
		return "", uuid.Nil, false
	}
	return tenant, id, true
}

// serveCreate serves a PUT of req (its command not yet read) through the
// collection's request front ([framework.Front]) and writes the reply. The
// legacy POST route shares it, with its key echoed. A retry of bytes
// already replayed takes its command from the front's replay cache
// ([Resource.ReplayCache]) and is answered without a write when its row
// asks for none.
func (c *Collection[Cmd, Model]) serveCreate(g *gin.Context, pattern string, start time.Time, req PutRequest[Cmd], key string) {
	ctx := g.Request.Context()
	target := framework.Target{Tenant: req.Tenant, PathParams: map[string]string{"id": req.ID.String()}, Header: req.Header, Replayable: true}
	reply := func(cmd Cmd, fingerprint string) bool {
		req.Command = cmd
		p := c.prepared(&req, fingerprint)
		res, answered, err := c.put(ctx, &p, true)
		if answered {
			c.answer(g, pattern, start, req, res, key, err)
		}
		return answered
	}
	run := func(cmd Cmd, fingerprint string) bool {
		req.Command = cmd
		p := c.prepared(&req, fingerprint)
		res, _, err := c.put(ctx, &p, false)
		c.answer(g, pattern, start, req, res, key, err)
		return err == nil && (res.Outcome == telemetry.OutcomeReplayed || res.Outcome == telemetry.OutcomeConverged)
	}
	if err := c.front.Serve(g.Request, target, reply, run); err != nil {
		c.fail(g, pattern, err)
	}
}

// answer writes the reply of a PUT, or its failure.
func (c *Collection[Cmd, Model]) answer(g *gin.Context, pattern string, start time.Time, req PutRequest[Cmd], res Result, key string, err error) {
	if err != nil {
		c.fail(g, pattern, err)
		return
	}
	c.written(g, pattern, start, req.Tenant, req.ID, res, key)
}

// refusePatch answers a PATCH of a create-only resource: 405
// method_not_allowed with the methods its items have, without reading the
// body.
func (c *Collection[Cmd, Model]) refusePatch(g *gin.Context) {
	_, err := c.checkPatch(&PatchRequest{})
	g.Header("Allow", "PUT, GET, HEAD, DELETE")
	c.fail(g, "", err)
}

// handlePatch reads the patch document, runs the PATCH and writes the
// reply. The media type is checked before the body is read.
func (c *Collection[Cmd, Model]) handlePatch(g *gin.Context) {
	start := time.Now()
	tenant, id, ok := c.target(g, "patch")
	if !ok {
		return
	}
	req := PatchRequest{Tenant: tenant, ID: id, ContentType: g.GetHeader("Content-Type"), Header: g.Request.Header}
	if _, err := parsePatchFormat(req.ContentType); err != nil {
		c.fail(g, "patch", err)
		return
	}
	body, err := c.engine.Binder().ReadBody(g.Request)
	if err != nil {
		c.fail(g, "patch", err)
		return
	}
	req.Patch = body
	res, err := c.Patch(g.Request.Context(), req)
	if err != nil {
		c.fail(g, "patch", err)
		return
	}
	c.written(g, "patch", start, tenant, id, res, "")
}

// written counts, traces and logs a write that succeeded and sends its
// reply, with the legacy POST's key echoed when key is not "".
func (c *Collection[Cmd, Model]) written(g *gin.Context, pattern string, start time.Time, tenant string, id uuid.UUID, res Result, key string) {
	c.engine.Metrics().Requests.WithLabelValues(pattern, c.res.Name, res.Outcome).Inc()
	// The key a retry repeats: the Idempotency-Key (legacy POST) or the
	// resource ID (PUT).
	retryKey := cmp.Or(key, id.String())
	telemetry.TraceOutcome(g.Request.Context(), pattern, c.res.Name, res.Outcome, retryKey)
	if c.engine.Logger().Enabled(g.Request.Context(), slog.LevelInfo) {
		// The fields of the POST fallback's events, and the ID.
		c.engine.Logger().LogAttrs(g.Request.Context(), slog.LevelInfo, "resource write",
			slog.String("pattern", pattern), slog.String("tenant", tenant), slog.String("operation", c.res.Name),
			slog.String("key_sha256", telemetry.KeyHash(retryKey)), slog.String("id", id.String()),
			slog.String("fingerprint", framework.FingerprintPrefix(res.Fingerprint)), slog.String("outcome", res.Outcome),
			slog.Bool("replayed", res.Replayed), slog.Int("status", res.Status), slog.Duration("duration", time.Since(start)))
	}
	framework.WriteReply(g.Writer, framework.Reply{Status: res.Status, Body: res.Body, Replayed: res.Replayed, Key: key, Location: res.Location, ETag: res.ETag})
}

func (c *Collection[Cmd, Model]) handleGet(g *gin.Context) {
	tenant, id, ok := c.target(g, "")
	if !ok {
		return
	}
	res, err := c.getForRequest(g, tenant, id)
	if err != nil {
		c.fail(g, "", err)
		return
	}
	if inm := g.GetHeader("If-None-Match"); inm != "" && etagMatchesWeak(inm, res.ETag) {
		g.Header("ETag", res.ETag)
		g.Status(http.StatusNotModified)
		return
	}
	writeRepresentation(g, res.Body, res.ETag)
}

// writeRepresentation answers 200 with body, or only its headers to HEAD.
func writeRepresentation(g *gin.Context, body []byte, etag string) {
	if g.Request.Method == http.MethodHead {
		h := g.Writer.Header()
		h.Set("Content-Type", "application/json; charset=utf-8")
		h.Set("Content-Length", strconv.Itoa(len(body)))
		body = nil
	}
	framework.WriteReply(g.Writer, framework.Reply{Status: http.StatusOK, Body: body, ETag: etag})
}

func (c *Collection[Cmd, Model]) handleDelete(g *gin.Context) {
	tenant, id, ok := c.target(g, "")
	if !ok {
		return
	}
	if err := c.Delete(g.Request.Context(), DeleteRequest{Tenant: tenant, ID: id, IfMatch: g.GetHeader("If-Match")}); err != nil {
		c.fail(g, "", err)
		return
	}
	g.Status(http.StatusNoContent)
}

func (c *Collection[Cmd, Model]) handleList(g *gin.Context) {
	tenant, ok := server.Tenant(g, c.engine.Logger())
	if !ok {
		return
	}
	req := ListRequest{Tenant: tenant, Limit: 50, Cursor: g.Query("cursor")}
	if s := g.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil {
			n = 0 // refused by List
		}
		req.Limit = n
	}
	for _, col := range c.res.Filters {
		if v, ok := g.GetQuery(col); ok {
			if req.Filters == nil {
				req.Filters = map[string]string{}
			}
			req.Filters[col] = v
		}
	}
	page, err := c.listForRequest(g, req)
	if err != nil {
		c.fail(g, "", err)
		return
	}
	body, err := json.Marshal(page)
	if err != nil {
		c.fail(g, "", err)
		return
	}
	writeRepresentation(g, body, "")
}
