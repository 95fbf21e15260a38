package collection

import (
	"encoding/json"
	"net/http"
	"reflect"
	"slices"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// Describe returns the descriptions of the routes [Collection.Mount]
// registers, for an API description (package framework/openapi): PUT, GET,
// HEAD and DELETE of {BasePath}/{id}, its PATCH for a create-or-replace
// resource, and the list GET and HEAD {BasePath}.
func (c *Collection[Cmd, Model]) Describe() []framework.RouteDescription {
	name, base := c.res.Name, c.res.BasePath
	item := base + "/{id}"
	rep := c.representation()
	id := framework.ParamDescription{Name: "id", Description: "The resource ID, a UUID chosen by the client.", Required: true, Format: "uuid"}
	minLimit, maxLimit := 1, MaxPageSize

	put := framework.RouteDescription{
		Method: http.MethodPut, Path: item, OperationID: name + ".put", Tags: []string{name},
		Summary: "Create or replace a " + name + " resource",
		Description: "Creates the resource with the client's ID (201); the same request again is a replay " +
			"(201 or 200 with Idempotent-Replayed: true) and writes nothing.",
		PathParams: []framework.ParamDescription{id}, Request: reflect.TypeFor[Cmd](), IfMatch: true, IfNoneMatch: true,
		Authenticated: true, ReplayWindow: c.engine.Retention().ReplayWindow,
		Responses: []framework.ResponseDescription{
			{Status: http.StatusCreated, Description: "Created, or a replay of the creation", Body: rep, Headers: framework.ReplayResponseHeaders()},
			{Status: http.StatusOK, Description: "Replaced, a replay of a replace, or the same request after the replay window", Body: rep,
				Headers: []string{wire.HeaderIdempotentReplayed, "ETag"}},
		},
		Problems: append(framework.WriteProblems(), wire.CodeInvalidResourceID, wire.CodePreconditionFailed, wire.CodeResourceDeleted),
	}
	if c.res.Mode == CreateOnly {
		put.Summary = "Create a " + name + " resource"
		put.Problems = append(put.Problems, wire.CodeIdempotencyKeyReuse)
	} else {
		put.Description += " A different body replaces the resource (200, version + 1). With If-Match, a stale ETag is " +
			"412 unless the body is already the current state (the retry of a replace whose answer was lost): 200, nothing written."
	}
	if c.res.ReplaceGuardFunc != nil {
		put.Problems = append(put.Problems, wire.CodeResourceLocked)
	}
	put.Problems = append(put.Problems, c.res.Problems...)

	get := framework.DescribeGet(item, name+".get", "Read a "+name+" resource", rep, id)
	get.Tags = []string{name}
	get.IfNoneMatch = true
	get.Responses[0].Headers = []string{"ETag"}
	get.Responses = append(get.Responses, framework.ResponseDescription{Status: http.StatusNotModified,
		Description: "If-None-Match matches the current ETag", Headers: []string{"ETag"}})
	head := get
	head.Method, head.OperationID, head.Summary = http.MethodHead, name+".head", "The headers of GET "+item
	head.Responses = []framework.ResponseDescription{{Status: http.StatusOK, Description: "The headers of the representation", Headers: []string{"ETag"}},
		get.Responses[1]}

	del := framework.RouteDescription{
		Method: http.MethodDelete, Path: item, OperationID: name + ".delete", Tags: []string{name},
		Summary: "Delete a " + name + " resource",
		Description: "Leaves a tombstone: GET answers 404 and a PUT to the ID 410 resource_deleted. " +
			"With If-Match, only while the ETag is current (else 412).",
		PathParams: []framework.ParamDescription{id}, Authenticated: true, IfMatch: true,
		Responses: []framework.ResponseDescription{{Status: http.StatusNoContent, Description: "Deleted"}},
		Problems:  append(framework.ReadProblems(), wire.CodeInvalidResourceID, wire.CodePreconditionFailed),
	}

	page := reflect.StructOf([]reflect.StructField{
		{Name: "Items", Type: reflect.SliceOf(rep), Tag: `json:"items"`},
		{Name: "NextCursor", Type: reflect.TypeFor[*string](), Tag: `json:"next_cursor"`},
	})
	list := framework.RouteDescription{
		Method: http.MethodGet, Path: base, OperationID: name + ".list", Tags: []string{name},
		Summary:     "List " + name,
		Description: "A page of the tenant's resources, newest first; pass next_cursor as cursor for the next page (null on the last).",
		Query: []framework.ParamDescription{
			{Name: "limit", Description: "Page size.", Type: "integer", Minimum: &minLimit, Maximum: &maxLimit},
			{Name: "cursor", Description: "The next_cursor of the previous page."},
		},
		Authenticated: true,
		Responses:     []framework.ResponseDescription{{Status: http.StatusOK, Description: "A page", Body: page}},
		// 409 request_in_progress: the page kept changing while it was read.
		Problems: []wire.Code{wire.CodeValidationFailed, wire.CodeUnauthenticated, wire.CodeRequestInProgress, wire.CodeUnavailable, wire.CodeInternal},
	}
	for _, f := range c.res.Filters {
		list.Query = append(list.Query, framework.ParamDescription{Name: f, Description: "Only resources whose " + f + " equals this value."})
	}
	headList := list
	headList.Method, headList.OperationID, headList.Summary = http.MethodHead, name+".list_head", "The headers of the list"
	headList.Responses = []framework.ResponseDescription{{Status: http.StatusOK, Description: "The headers of a page"}}
	routes := []framework.RouteDescription{put, get, head, del, list, headList}
	if c.res.Mode == CreateOrReplace {
		routes = append(routes, c.describePatch(id))
	}
	return routes
}

// describePatch describes the PATCH [Collection.Mount] derives.
func (c *Collection[Cmd, Model]) describePatch(id framework.ParamDescription) framework.RouteDescription {
	name := c.res.Name
	d := framework.RouteDescription{
		Method: http.MethodPatch, Path: c.res.BasePath + "/{id}", OperationID: name + ".patch", Tags: []string{name},
		Summary: "Patch a " + name + " resource",
		Description: "Applies a merge patch (RFC 7396: application/merge-patch+json, or application/json; null removes an optional " +
			"member, an array is replaced whole) or a JSON Patch (RFC 6902: application/json-patch+json, with an If-Match naming " +
			"a version, else 428 precondition_required: If-Match: * names none; an array index RFC 6901 forbids, such as -1, 01 " +
			"or +0, is 400) to the body a PUT of the current state would carry. " +
			"The result is validated as a PUT body and written as a replace (200, version + 1). A result equal to the current " +
			"state writes nothing (200, Idempotent-Replayed: true), even when If-Match is stale: the retry of a PATCH whose " +
			"answer was lost converges. A stale If-Match whose result differs is 412. A PATCH never creates: 404 for an unknown " +
			"ID, 410 for a deleted one, and If-None-Match: * is 412.",
		PathParams: []framework.ParamDescription{id}, Request: reflect.TypeFor[Cmd](), Patch: true, IfMatch: true, IfNoneMatch: true,
		Authenticated: true,
		Responses: []framework.ResponseDescription{{Status: http.StatusOK, Description: "Patched, or already in the patched state",
			Body: c.representation(), Headers: []string{wire.HeaderIdempotentReplayed, "ETag"}}},
		Problems: append(framework.WriteProblems(), wire.CodeInvalidResourceID, wire.CodeNotFound, wire.CodePreconditionFailed,
			wire.CodePreconditionRequired, wire.CodeResourceDeleted),
	}
	if c.res.ReplaceGuardFunc != nil {
		d.Problems = append(d.Problems, wire.CodeResourceLocked)
	}
	d.Problems = append(d.Problems, c.res.Problems...)
	return d
}

// DescribeLegacyPOST returns the description of the route
// [Collection.MountLegacyPOST] registers with cfg.
func (c *Collection[Cmd, Model]) DescribeLegacyPOST(cfg LegacyConfig) framework.RouteDescription {
	name := c.res.Name
	extra := []string{wire.HeaderIdempotencyKey, "Deprecation", "Link"}
	if !cfg.Sunset.IsZero() {
		extra = append(extra, "Sunset")
	}
	return framework.RouteDescription{
		Method: http.MethodPost, Path: c.res.BasePath, OperationID: name + ".legacy_post", Tags: []string{name},
		Summary: "Create a " + name + " resource (deprecated: use PUT " + c.res.BasePath + "/{id})",
		Description: "The ID is derived from the Idempotency-Key; a retry with the same key and body replays the creation, " +
			"the same key with another body is 422 idempotency_key_reuse.",
		Request: reflect.TypeFor[Cmd](), IdempotencyKey: framework.KeyRequired, Authenticated: true, Deprecated: true,
		ReplayWindow: c.engine.Retention().ReplayWindow,
		Responses: []framework.ResponseDescription{{Status: http.StatusCreated, Description: "Created, or a replay of the creation",
			Body: c.representation(), Headers: framework.ReplayResponseHeaders(extra...)}},
		Problems: slices.Concat(framework.WriteProblems(), []wire.Code{wire.CodeIdempotencyKeyMissing,
			wire.CodeIdempotencyKeyInvalid, wire.CodeIdempotencyKeyReuse, wire.CodeResourceDeleted}, c.res.Problems),
		ProblemHeaders: extra[1:],
	}
}

// representation is the type RenderFunc returns, found by rendering a zero
// model; json.RawMessage (any JSON) for the default representation or when
// that cannot be done.
func (c *Collection[Cmd, Model]) representation() (t reflect.Type) {
	anyJSON := reflect.TypeFor[json.RawMessage]()
	defer func() {
		if recover() != nil {
			t = anyJSON
		}
	}()
	if c.res.RenderFunc == nil {
		return anyJSON
	}
	if t = reflect.TypeOf(c.res.RenderFunc(new(Model))); t == nil {
		return anyJSON
	}
	return t
}
