package openapi

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"path"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/wire"
)

// Version is the OpenAPI version of the documents this package writes
// unless [Config.OpenAPI] asks for [Version30].
const Version = "3.1.0"

// Version30 is the OpenAPI 3.0 version this package writes for the tools
// that read 3.0 only (oapi-codegen): [Config.OpenAPI].
const Version30 = "3.0.3"

// ReplayWindowExtension is the operation extension that carries the replay
// window in seconds, for tools; the description says it in words too.
const ReplayWindowExtension = "x-retrysafe-replay-window-seconds"

// Config describes the API as a whole.
type Config struct {
	// Title is the API's name. Required.
	Title string
	// Version is the API's version (not OpenAPI's). Required.
	Version string
	// Description is Markdown shown above the operations. Defaults to a
	// summary of the retry contract.
	Description string
	// Servers are base URLs of the API ("https://api.example.com"), in
	// order of preference, each written without a trailing slash ("/"
	// aside). Defaults to one server "/": relative to where the document
	// is served, which is what OpenAPI assumes when the list is absent,
	// said explicitly so that linters find a server.
	//
	// A client joins a server's URL and an operation's path. A server may
	// carry a path ("https://api.example.com/shop", or "/shop"), and the
	// routes may name it too (a collection mounted under /shop has it in
	// its BasePath, so that its Location headers are right): either way
	// works. When every route path starts with the servers' path, the
	// document writes the paths relative to it (/v1/orders/{id}, never
	// /shop/shop/v1/…); when none does, they are written as they are.
	// Route paths of which only some start with it, or servers with
	// different paths and route paths that start with one of them, are
	// an error of New.
	Servers []string
	// License is the license of the API, in info.license. Defaults to
	// none (redocly's recommended rules then warn: info-license).
	License *License
	// Contact is who answers for the API, in info.contact. Defaults to
	// none.
	Contact *Contact
	// TermsOfService is the URL of the API's terms of service. Defaults to
	// none.
	TermsOfService string
	// Codes gives each problem code its status and retryability: pass the
	// engine's registry ([framework.Engine.Codes]) so that the resources'
	// business codes are known. Defaults to the generic codes only; a
	// route naming a code the registry does not know is an error.
	Codes *framework.Codes
	// OpenAPI is the version of OpenAPI the document is written in:
	// [Version] (3.1.0) or [Version30] (3.0.3), for generators that read
	// 3.0 only. The two describe the same API; 3.0 spells a field that
	// may be null with nullable: true instead of a type list, and a
	// License Identifier (an SPDX identifier, not an expression) as the
	// URL of the license's text on spdx.org. Defaults to [Version].
	OpenAPI string
}

// License is the license of an API: a name and either an SPDX
// identifier ("Apache-2.0") or a URL, not both.
type License struct {
	// Name is the license's name ("Apache 2.0"). Required.
	Name string
	// Identifier is the SPDX expression of the license. Defaults to none.
	Identifier string
	// URL is where the license's text is. Defaults to none.
	URL string
}

// Contact is who answers for an API; any of its fields may be empty.
type Contact struct {
	Name  string
	URL   string
	Email string
}

// Document is a generated OpenAPI description, validated when built.
type Document struct {
	doc  *openapi3.T
	json []byte
}

// New builds and validates the OpenAPI document of routes. A route whose
// declaration cannot be described (a duplicate operation, a path parameter
// the path does not name) is an error, so a bad description fails at
// start-up, never while serving.
func New(cfg Config, routes ...framework.RouteDescription) (*Document, error) {
	if cfg.Title == "" || cfg.Version == "" {
		return nil, errors.New("openapi: Config.Title and Config.Version are required")
	}
	if cfg.Description == "" {
		cfg.Description = defaultDescription
	}
	if len(cfg.Servers) == 0 {
		cfg.Servers = []string{"/"}
	}
	if cfg.OpenAPI == "" {
		cfg.OpenAPI = Version
	}
	if cfg.OpenAPI != Version && cfg.OpenAPI != Version30 {
		return nil, fmt.Errorf("openapi: Config.OpenAPI is %q: want %s or %s", cfg.OpenAPI, Version, Version30)
	}
	info := &openapi3.Info{Title: cfg.Title, Version: cfg.Version, Description: cfg.Description, TermsOfService: cfg.TermsOfService}
	if l := cfg.License; l != nil {
		if l.Name == "" || l.Identifier != "" && l.URL != "" {
			return nil, errors.New("openapi: Config.License needs a Name and at most one of Identifier and URL")
		}
		info.License = &openapi3.License{Name: l.Name, URL: l.URL, Identifier: l.Identifier}
	}
	if c := cfg.Contact; c != nil {
		info.Contact = &openapi3.Contact{Name: c.Name, URL: c.URL, Email: c.Email}
	}
	doc := &openapi3.T{
		OpenAPI: Version,
		Info:    info,
		Paths:   openapi3.NewPaths(),
		Components: &openapi3.Components{SecuritySchemes: openapi3.SecuritySchemes{
			"bearer": &openapi3.SecuritySchemeRef{Value: &openapi3.SecurityScheme{Type: "http", Scheme: "bearer",
				Description: "Authorization: Bearer <token>; the token selects the tenant."}},
		}},
	}
	for _, s := range cfg.Servers {
		// A client appends a path that starts with a slash.
		doc.AddServer(&openapi3.Server{URL: orText(strings.TrimSuffix(s, "/"), "/")})
	}
	doc.Components.Schemas = openapi3.Schemas{problemComponent: openapi3.NewSchemaRef("",
		structSchema(reflect.TypeFor[wire.Problem](), outbound, 0))}
	named := components{doc: doc, dirs: map[string]direction{}, codes: cfg.Codes, names: componentNames(routes)}
	base, err := serversPath(cfg.Servers, routes)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, r := range routes {
		if base != "" {
			r.Path = orText(strings.TrimPrefix(r.Path, base), "/")
		}
		key := r.Method + " " + r.Path
		if seen[key] {
			return nil, fmt.Errorf("openapi: %s is described twice", key)
		}
		seen[key] = true
		op, err := named.operation(r)
		if err != nil {
			return nil, fmt.Errorf("openapi: %s: %w", key, err)
		}
		doc.AddOperation(r.Path, r.Method, op)
	}
	if cfg.OpenAPI == Version30 {
		if err := downgrade(doc); err != nil {
			return nil, err
		}
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi: the generated document is invalid: %w", err)
	}
	body, err := doc.MarshalJSON()
	if err != nil {
		return nil, err
	}
	return &Document{doc: doc, json: body}, nil
}

// T returns the document for kin-openapi's tools (routers, openapi3filter).
// It must not be modified.
func (d *Document) T() *openapi3.T { return d.doc }

// JSON returns the document as JSON.
func (d *Document) JSON() []byte { return slices.Clone(d.json) }

// ServeHTTP serves the document as application/json (GET /openapi.json).
func (d *Document) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(d.json)))
	_, _ = w.Write(d.json)
}

const defaultDescription = `Writes are safe to retry.

* **PUT with a client-chosen UUID** creates or replaces a resource; sending the same request again converges on the same resource.
* **POST with an Idempotency-Key** (1–255 characters of ` + "`[A-Za-z0-9._:-]`" + `, made once per logical operation) runs the operation once and replays its stored answer, marked ` + "`Idempotent-Replayed: true`" + `, to every retry within the replay window.

Errors are RFC 9457 problem documents with a stable ` + "`code`" + `. ` + "`Retry-After`" + ` is sent on exactly the answers that may be retried with the same ID or key (409 request_in_progress, 409 outcome_pending, 429, 503), never on a final one.`

// problemComponent is the component name of the RFC 9457 body.
const problemComponent = "Problem"

// components names the top-level body schemas of named Go types in the
// document's components, so that tools see one schema per type.
type components struct {
	doc   *openapi3.T
	dirs  map[string]direction
	codes *framework.Codes
	// names are the component names of the body types ([componentNames]).
	names map[reflect.Type]string
}

// componentNames names the named Go types of the routes' bodies (a
// request of a route that is not a patch, a response): by the type's name
// ("Command"), qualified by its package's name only where two types, or
// a type and the framework's Problem, share it ("orders.Command",
// "payments.Command"). A generic type is named without its type
// arguments; a name that is still ambiguous gets no component, and its
// schema is written inline.
func componentNames(routes []framework.RouteDescription) map[reflect.Type]string {
	byName := map[string][]reflect.Type{problemComponent: {reflect.TypeFor[wire.Problem]()}}
	add := func(t reflect.Type) {
		if t == nil || t.PkgPath() == "" || t.Name() == "" {
			return
		}
		name, _, _ := strings.Cut(t.Name(), "[")
		if !slices.Contains(byName[name], t) {
			byName[name] = append(byName[name], t)
		}
	}
	for _, r := range routes {
		if !r.Patch {
			add(r.Request)
		}
		for _, resp := range r.Responses {
			add(resp.Body)
		}
	}
	names, uses := map[reflect.Type]string{}, map[string]int{}
	for name, ts := range byName {
		for _, t := range ts {
			if len(ts) > 1 && t != reflect.TypeFor[wire.Problem]() {
				names[t] = path.Base(t.PkgPath()) + "." + name
			} else {
				names[t] = name
			}
			uses[names[t]]++
		}
	}
	for t, name := range names {
		if uses[name] > 1 || name == problemComponent {
			delete(names, t)
		}
	}
	return names
}

// serversPath is the path that every server in servers carries and every
// route path starts with ([Config.Servers]): the document writes the
// route paths relative to it. It is "" when the paths are written as they
// are.
func serversPath(servers []string, routes []framework.RouteDescription) (string, error) {
	var paths []string
	for _, s := range servers {
		p := ""
		if u, err := url.Parse(s); err == nil {
			p = strings.TrimSuffix(u.Path, "/")
		}
		if !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	under := func(p string) (n int) {
		for _, r := range routes {
			if p != "" && (r.Path == p || strings.HasPrefix(r.Path, p+"/")) {
				n++
			}
		}
		return n
	}
	if len(paths) > 1 {
		for _, p := range paths {
			if under(p) > 0 {
				return "", fmt.Errorf("openapi: the servers have different paths (%s), and route paths start with %s: "+
					"give the servers one path, or route paths without it", strings.Join(paths, ", "), p)
			}
		}
		return "", nil
	}
	switch n := under(paths[0]); {
	case n == 0:
		return "", nil
	case n < len(routes):
		return "", fmt.Errorf("openapi: %d of %d route paths start with the servers' path %s: all or none must", n, len(routes), paths[0])
	}
	return paths[0], nil
}

// body returns a reference to the component of t, adding it on first use;
// a type [componentNames] did not name, or a name already used in the
// other direction, is inlined.
func (c components) body(t reflect.Type, dir direction) *openapi3.SchemaRef {
	name := c.names[t]
	if d, ok := c.dirs[name]; name == "" || (ok && d != dir) {
		return openapi3.NewSchemaRef("", schemaFor(t, dir))
	}
	if _, ok := c.dirs[name]; !ok {
		c.dirs[name] = dir
		c.doc.Components.Schemas[name] = openapi3.NewSchemaRef("", schemaFor(t, dir))
	}
	return openapi3.NewSchemaRef("#/components/schemas/"+name, c.doc.Components.Schemas[name].Value)
}

func (c components) operation(r framework.RouteDescription) (*openapi3.Operation, error) {
	op := openapi3.NewOperation()
	op.OperationID, op.Summary, op.Tags, op.Deprecated = r.OperationID, r.Summary, r.Tags, r.Deprecated
	op.Description = r.Description
	// Linters want a summary on every operation; the ID is one.
	op.Summary = orText(r.Summary, r.OperationID)
	if r.ReplayWindow > 0 {
		op.Description = strings.TrimSpace(op.Description + fmt.Sprintf(
			"\n\nReplay window: %s. A retry with the same ID or key within it gets the original answer, marked `Idempotent-Replayed: true`.",
			r.ReplayWindow))
		op.Extensions = map[string]any{ReplayWindowExtension: int64(r.ReplayWindow.Seconds())}
	}
	if r.Authenticated {
		op.Security = &openapi3.SecurityRequirements{{"bearer": []string{}}}
	}
	named := map[string]bool{}
	for _, p := range r.PathParams {
		if !strings.Contains(r.Path, "{"+p.Name+"}") {
			return nil, fmt.Errorf("path parameter %q is not in the path", p.Name)
		}
		named[p.Name] = true
		op.AddParameter(openapi3.NewPathParameter(p.Name).WithDescription(p.Description).WithSchema(paramSchema(p)))
	}
	for _, seg := range strings.Split(r.Path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok && !named[strings.TrimSuffix(name, "}")] {
			return nil, fmt.Errorf("path parameter %s is not described", seg)
		}
	}
	for _, p := range r.Query {
		op.AddParameter(openapi3.NewQueryParameter(p.Name).WithDescription(p.Description).WithRequired(p.Required).WithSchema(paramSchema(p)))
	}
	if r.IdempotencyKey != framework.KeyNone {
		keyDoc := "The idempotency key, made once per logical operation and sent unchanged on every retry: 1–255 characters of `[A-Za-z0-9._:-]`, optionally in Structured-Field string form (`\"abc\"`)."
		if r.IdempotencyKey == framework.KeyRequired {
			keyDoc += " Required (as Idempotency-Key or X-Idempotency-Key): without it the answer is 400 idempotency_key_missing."
		} else {
			keyDoc += " Optional: without it the operation runs and nothing is replayed."
		}
		op.AddParameter(openapi3.NewHeaderParameter(wire.HeaderIdempotencyKey).WithDescription(keyDoc).WithSchema(keySchema()))
		op.AddParameter(openapi3.NewHeaderParameter(wire.HeaderXIdempotencyKey).
			WithDescription("Accepted in place of Idempotency-Key; when both are sent they must be equal.").WithSchema(keySchema()))
	}
	if r.IfMatch {
		doc := "Apply only if the resource's current ETag is one of these (or `*`); else 412 precondition_failed, " +
			"unless the write's result is already the current state (200, nothing written)."
		if r.Patch {
			doc += " A JSON Patch needs an ETag here: without one, or with `*`, it is 428 precondition_required."
		}
		op.AddParameter(openapi3.NewHeaderParameter("If-Match").WithSchema(&openapi3.Schema{Type: types("string")}).WithDescription(doc))
	}
	if r.IfNoneMatch {
		op.AddParameter(openapi3.NewHeaderParameter("If-None-Match").WithSchema(&openapi3.Schema{Type: types("string")}).
			WithDescription(ifNoneMatchDoc(r.Method)))
	}
	switch {
	case r.Request != nil && r.Patch:
		merge := openapi3.NewMediaType().WithSchema(mergePatchSchema(schemaFor(r.Request, inbound)))
		body := openapi3.NewRequestBody().WithRequired(true).WithDescription(
			"A merge patch (RFC 7396) of the PUT body, or a JSON Patch (RFC 6902) of it; the result must be a valid PUT body.")
		body.Content = openapi3.Content{collection.ContentTypeMergePatch: merge, "application/json": merge,
			collection.ContentTypeJSONPatch: openapi3.NewMediaType().WithSchema(jsonPatchSchema())}
		op.RequestBody = &openapi3.RequestBodyRef{Value: body}
	case r.Request != nil:
		op.RequestBody = &openapi3.RequestBodyRef{Value: openapi3.NewRequestBody().WithRequired(true).
			WithJSONSchemaRef(c.body(r.Request, inbound))}
	}

	op.Responses = openapi3.NewResponsesWithCapacity(len(r.Responses) + len(r.Problems))
	for _, resp := range r.Responses {
		out := openapi3.NewResponse().WithDescription(orText(resp.Description, http.StatusText(resp.Status)))
		if resp.Body != nil {
			out.WithJSONSchemaRef(c.body(resp.Body, outbound))
		}
		out.Headers = headers(resp.Headers)
		op.Responses.Set(strconv.Itoa(resp.Status), &openapi3.ResponseRef{Value: out})
	}
	byStatus := map[int][]wire.CodeInfo{}
	for _, code := range r.Problems {
		info, ok := c.codes.Lookup(code)
		if !ok {
			return nil, fmt.Errorf("problem code %q is not registered", code)
		}
		if !slices.Contains(byStatus[info.Status], info) {
			byStatus[info.Status] = append(byStatus[info.Status], info)
		}
	}
	for _, status := range slices.Sorted(maps.Keys(byStatus)) {
		if op.Responses.Value(strconv.Itoa(status)) != nil {
			return nil, fmt.Errorf("status %d is both a response and a problem", status)
		}
		codes := byStatus[status]
		names := make([]string, len(codes))
		retry := false
		for i, info := range codes {
			names[i] = string(info.Code)
			retry = retry || info.Retryable
		}
		hs := slices.Clone(r.ProblemHeaders)
		if retry {
			hs = append(hs, "Retry-After")
		}
		if status == http.StatusUnauthorized {
			hs = append(hs, "WWW-Authenticate")
		}
		out := openapi3.NewResponse().WithDescription("Problem: " + strings.Join(names, ", "))
		out.Content = openapi3.Content{wire.ContentTypeProblem: openapi3.NewMediaType().WithSchemaRef(c.problem(status, names))}
		out.Headers = headers(hs)
		op.Responses.Set(strconv.Itoa(status), &openapi3.ResponseRef{Value: out})
	}
	return op, nil
}

// ifNoneMatchDoc is what If-None-Match means on a route of method.
func ifNoneMatchDoc(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "304 Not Modified, with no body, when the current ETag is one of these (weak comparison) or `*`."
	case http.MethodPatch:
		return "`*` is false on an existing resource (a PATCH never creates one): 412 precondition_failed, nothing written."
	}
	return "`*`: create only. An existing resource created by the same request is replayed (201, Idempotent-Replayed); any other is 412 precondition_failed."
}

func orText(s, fallback string) string {
	if s != "" {
		return s
	}
	return fallback
}

func paramSchema(p framework.ParamDescription) *openapi3.Schema {
	s := &openapi3.Schema{Type: types("string"), Format: p.Format}
	if p.Type == "integer" {
		s.Type = types("integer")
	}
	if p.Minimum != nil {
		v := float64(*p.Minimum)
		s.Min = &v
	}
	if p.Maximum != nil {
		v := float64(*p.Maximum)
		s.Max = &v
	}
	return s
}

func keySchema() *openapi3.Schema {
	return &openapi3.Schema{Type: types("string"), Pattern: `^(?:[A-Za-z0-9._:-]{1,255}|"[A-Za-z0-9._:-]{1,255}")$`}
}

// headerDoc describes a response header a route may name. Header names
// are case-insensitive, and a route may name one in any case (the POST
// fallback's stored headers are canonicalized: "Etag"): name is the
// spelling the document uses, the framework's for the headers it knows.
func headerDoc(header string) (name, doc string, schema *openapi3.Schema) {
	is := func(known string) bool {
		if strings.EqualFold(header, known) {
			name = known
			return true
		}
		return false
	}
	switch {
	case is(wire.HeaderIdempotentReplayed):
		return name, "`true` when this answer repeats an earlier execution (whose answer may have been lost); absent otherwise.",
			&openapi3.Schema{Type: types("string"), Enum: []any{"true"}}
	case is(wire.HeaderIdempotencyKey):
		return name, "The idempotency key of the request, echoed.", keySchema()
	case is("Location"):
		return name, "The URL of the resource.", &openapi3.Schema{Type: types("string"), Format: "uri-reference"}
	case is("ETag"):
		return name, "The strong entity tag of the representation; send it as If-Match.", stringSchema()
	case is("Retry-After"):
		return name, "Seconds to wait before retrying with the same ID or key. Sent on retryable answers only.",
			&openapi3.Schema{Type: types("integer"), Min: new(float64)}
	case is("Deprecation"):
		return name, "RFC 9745: when this route was deprecated (`@` + Unix seconds).", stringSchema()
	case is("Sunset"):
		return name, "RFC 8594: when this route will be turned off.", stringSchema()
	case is("Link"):
		return name, "The successor of this deprecated route (`rel=\"successor-version\"`).", stringSchema()
	case is("WWW-Authenticate"):
		return name, "The authentication scheme (Bearer).", stringSchema()
	}
	return header, "", stringSchema()
}

func stringSchema() *openapi3.Schema { return &openapi3.Schema{Type: types("string")} }

func headers(names []string) openapi3.Headers {
	if len(names) == 0 {
		return nil
	}
	out := openapi3.Headers{}
	for _, n := range names {
		name, doc, schema := headerDoc(n)
		out[name] = &openapi3.HeaderRef{Value: &openapi3.Header{Parameter: openapi3.Parameter{
			Description: doc, Schema: openapi3.NewSchemaRef("", schema)}}}
	}
	return out
}

// problem is the RFC 9457 body of a problem answer with one of codes: the
// Problem component, narrowed to the status and the codes.
func (c components) problem(status int, codes []string) *openapi3.SchemaRef {
	enum := make([]any, len(codes))
	for i, code := range codes {
		enum[i] = code
	}
	st := float64(status)
	narrow := &openapi3.Schema{Properties: openapi3.Schemas{
		"code":   openapi3.NewSchemaRef("", &openapi3.Schema{Enum: enum}),
		"status": openapi3.NewSchemaRef("", &openapi3.Schema{Min: &st, Max: &st}),
	}}
	ref := openapi3.NewSchemaRef("#/components/schemas/"+problemComponent, c.doc.Components.Schemas[problemComponent].Value)
	return openapi3.NewSchemaRef("", &openapi3.Schema{AllOf: openapi3.SchemaRefs{ref, openapi3.NewSchemaRef("", narrow)}})
}
