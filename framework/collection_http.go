package framework

import (
	"cmp"
	"encoding/json"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
)

// Mount registers the collection's routes on g, which must already run
// [RequireAuth]:
//
//	PUT    /{name}/:id   create, converge or replace
//	GET    /{name}/:id   the representation and its ETag
//	DELETE /{name}/:id   tombstone
//	GET    /{name}       a cursor-paginated page of the tenant's resources
func (c *Collection[T]) Mount(g gin.IRouter) {
	base := "/" + c.res.Name
	g.PUT(base+"/:id", c.handlePut)
	g.GET(base+"/:id", c.handleGet)
	g.DELETE(base+"/:id", c.handleDelete)
	g.GET(base, c.handleList)
}

// ResourceID parses the :id path parameter as a non-nil UUID.
func ResourceID(c *gin.Context) (uuid.UUID, error) {
	id, err := uuid.Parse(c.Param("id"))
	if err != nil || id == uuid.Nil {
		return uuid.Nil, Errorf(CodeInvalidResourceID, "the resource ID must be a non-nil UUID")
	}
	return id, nil
}

func (c *Collection[T]) fail(g *gin.Context, pattern string, err error) {
	if pattern != "" {
		c.engine.metrics.Requests.WithLabelValues(pattern, c.res.Name, OutcomeOf(err)).Inc()
		TraceOutcome(g.Request.Context(), pattern, c.res.Name, OutcomeOf(err), "")
	}
	c.engine.WriteProblem(g.Writer, g.Request, err)
}

func (c *Collection[T]) handlePut(g *gin.Context) {
	start := time.Now()
	tenant, id, ok := c.target(g, "put")
	if !ok {
		return
	}
	c.serveCreate(g, "put", start, PutRequest[T]{Tenant: tenant, ID: id, Header: g.Request.Header}, "")
}

// target reads the authenticated tenant and the :id of a request, or
// answers 401 or 400 and reports false.
func (c *Collection[T]) target(g *gin.Context, pattern string) (string, uuid.UUID, bool) {
	tenant, ok := Tenant(g, c.engine.logger)
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

// serveCreate binds the body into req.Command, runs the PUT and writes the
// reply. The legacy POST route shares it, with its key echoed.
func (c *Collection[T]) serveCreate(g *gin.Context, pattern string, start time.Time, req PutRequest[T], key string) {
	body, err := c.engine.binder.ReadBody(g.Request)
	if err != nil {
		c.fail(g, pattern, err)
		return
	}
	if req.Command, err = Bind[T](c.engine.binder, body); err != nil {
		c.fail(g, pattern, err)
		return
	}
	res, err := c.Put(g.Request.Context(), req)
	if err != nil {
		c.fail(g, pattern, err)
		return
	}
	c.engine.metrics.Requests.WithLabelValues(pattern, c.res.Name, res.Outcome).Inc()
	TraceOutcome(g.Request.Context(), pattern, c.res.Name, res.Outcome, cmp.Or(key, req.ID.String()))
	c.engine.logger.LogAttrs(g.Request.Context(), slog.LevelInfo, "resource write",
		slog.String("pattern", pattern), slog.String("tenant", req.Tenant), slog.String("resource", c.res.Name),
		slog.String("id", req.ID.String()), slog.String("outcome", res.Outcome), slog.Bool("replayed", res.Replayed),
		slog.Int("status", res.Status), slog.Duration("duration", time.Since(start)))
	WriteReply(g.Writer, Reply{Status: res.Status, Body: res.Body, Replayed: res.Replayed, Key: key, Location: res.Location, ETag: res.ETag})
}

func (c *Collection[T]) handleGet(g *gin.Context) {
	tenant, id, ok := c.target(g, "")
	if !ok {
		return
	}
	res, err := c.Get(g.Request.Context(), tenant, id)
	if err != nil {
		c.fail(g, "", err)
		return
	}
	WriteReply(g.Writer, Reply{Status: http.StatusOK, Body: res.Body, ETag: res.ETag})
}

func (c *Collection[T]) handleDelete(g *gin.Context) {
	tenant, id, ok := c.target(g, "")
	if !ok {
		return
	}
	if err := c.Delete(g.Request.Context(), tenant, id); err != nil {
		c.fail(g, "", err)
		return
	}
	g.Status(http.StatusNoContent)
}

func (c *Collection[T]) handleList(g *gin.Context) {
	tenant, ok := Tenant(g, c.engine.logger)
	if !ok {
		return
	}
	limit := 50
	if s := g.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			c.fail(g, "", &Error{Code: CodeValidationFailed, Detail: "limit must be an integer from 1 to " + strconv.Itoa(MaxPageSize),
				Fields: []FieldError{{Field: "limit", Reason: "min=1,max=" + strconv.Itoa(MaxPageSize)}}})
			return
		}
		limit = n
	}
	page, err := c.List(g.Request.Context(), tenant, limit, g.Query("cursor"))
	if err != nil {
		c.fail(g, "", err)
		return
	}
	body, err := json.Marshal(page)
	if err != nil {
		c.fail(g, "", err)
		return
	}
	WriteReply(g.Writer, Reply{Status: http.StatusOK, Body: body})
}
