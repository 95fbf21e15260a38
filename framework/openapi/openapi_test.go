package openapi_test

import (
	"encoding/json"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/routers/legacy"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/openapi"
	"github.com/retrysafe/retrysafe/internal/redocly"
	"github.com/retrysafe/retrysafe/wire"
)

type line struct {
	SKU      string `json:"sku" validate:"required,max=64"`
	Quantity int64  `json:"quantity" validate:"min=1,max=10000"`
}

type command struct {
	Customer string            `json:"customer" validate:"required,max=64"`
	Currency string            `json:"currency" validate:"required,iso4217"`
	Lines    []line            `json:"lines" validate:"required,min=1,max=100,dive"`
	Amount   framework.Integer `json:"amount" validate:"min=1,max=99999999"`
	Method   string            `json:"method" validate:"oneof=card bank"`
	Note     string            `json:"note,omitempty" validate:"max=500"`
	Tag      string            `json:"tag" validate:"omitempty,sku_format"`
	internal string
}

type representation struct {
	ID        string    `json:"id"`
	Note      string    `json:"note,omitempty"`
	Cursor    *string   `json:"cursor"`
	CreatedAt time.Time `json:"created_at"`
}

func route() framework.RouteDescription {
	return framework.RouteDescription{
		Method: http.MethodPost, Path: "/v1/things/{id}", OperationID: "things.create",
		PathParams:     []framework.ParamDescription{{Name: "id", Required: true, Format: "uuid"}},
		Request:        reflect.TypeFor[command](),
		IdempotencyKey: framework.KeyRequired, Authenticated: true, ReplayWindow: 24 * time.Hour,
		Responses: []framework.ResponseDescription{{Status: http.StatusCreated, Body: reflect.TypeFor[representation](),
			Headers: framework.ReplayResponseHeaders(wire.HeaderIdempotencyKey)}},
		Problems: append(framework.WriteProblems(), wire.CodeIdempotencyKeyReuse, wire.CodeResourceLocked),
	}
}

func TestSchemasFollowValidateTags(t *testing.T) {
	t.Parallel()
	doc, err := openapi.New(openapi.Config{Title: "t", Version: "1"}, route())
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	op := doc.T().Paths.Value("/v1/things/{id}").Post
	body := op.RequestBody.Value.Content.Get("application/json").Schema.Value
	if want := []string{"customer", "currency", "lines", "amount"}; !slices.Equal(body.Required, want) {
		t.Fatalf("required %v, want %v", body.Required, want)
	}
	props := body.Properties
	if props["customer"].Value.MinLength != 1 || *props["customer"].Value.MaxLength != 64 {
		t.Fatalf("customer: %+v", props["customer"].Value)
	}
	lines := props["lines"].Value
	if lines.MinItems != 1 || *lines.MaxItems != 100 || *lines.Items.Value.Properties["quantity"].Value.Max != 10000 {
		t.Fatalf("lines: %+v", lines)
	}
	if amount := props["amount"].Value; !amount.Type.Is("integer") || *amount.Min != 1 {
		t.Fatalf("amount: %+v", amount)
	}
	if got := props["method"].Value.Enum; len(got) != 2 || got[0] != "card" {
		t.Fatalf("method enum %v", got)
	}
	if d := props["tag"].Value.Description; !strings.Contains(d, "sku_format") {
		t.Fatalf("a custom rule is not named: %q", d)
	}
	if ref := op.RequestBody.Value.Content.Get("application/json").Schema.Ref; ref != "#/components/schemas/command" {
		t.Fatalf("request body ref %q, want the command's component", ref)
	}
	if _, ok := props["internal"]; ok || *body.AdditionalProperties.Has {
		t.Fatalf("unexported field or open schema: %+v", body)
	}

	created := op.Responses.Status(http.StatusCreated).Value
	rep := created.Content.Get("application/json").Schema.Value
	if want := []string{"id", "cursor", "created_at"}; !slices.Equal(rep.Required, want) {
		t.Fatalf("response required %v, want %v", rep.Required, want)
	}
	if !rep.Properties["cursor"].Value.Type.Includes("null") || rep.Properties["created_at"].Value.Format != "date-time" {
		t.Fatalf("cursor/created_at: %+v", rep.Properties)
	}
	for _, h := range []string{"Idempotent-Replayed", "Location", "ETag", "Idempotency-Key"} {
		if created.Headers[h] == nil {
			t.Fatalf("201 does not declare %s", h)
		}
	}
	conflict := op.Responses.Status(http.StatusConflict).Value
	if conflict.Headers["Retry-After"] == nil {
		t.Fatal("409 with request_in_progress does not declare Retry-After")
	}
	if codes := conflict.Content.Get("application/problem+json").Schema.Value.AllOf[1].Value.Properties["code"].Value.Enum; len(codes) != 2 {
		t.Fatalf("409 codes %v, want request_in_progress and resource_locked", codes)
	}
	if op.Responses.Status(http.StatusUnprocessableEntity).Value.Headers["Retry-After"] != nil {
		t.Fatal("422 declares Retry-After, a final answer never carries it")
	}
	if op.Extensions[openapi.ReplayWindowExtension] != int64(86400) {
		t.Fatalf("replay window extension %v", op.Extensions)
	}
	for _, h := range []string{"Idempotency-Key", "X-Idempotency-Key"} {
		if op.Parameters.GetByInAndName("header", h) == nil {
			t.Fatalf("%s not declared", h)
		}
	}
}

func TestNewRefusesBadDescriptions(t *testing.T) {
	t.Parallel()
	undescribed := route()
	undescribed.PathParams = nil
	if _, err := openapi.New(openapi.Config{Title: "t", Version: "1"}, undescribed); err == nil {
		t.Fatal("a path parameter without a description was accepted")
	}
	if _, err := openapi.New(openapi.Config{Title: "t", Version: "1"}, route(), route()); err == nil {
		t.Fatal("a route described twice was accepted")
	}
	if _, err := openapi.New(openapi.Config{}, route()); err == nil {
		t.Fatal("a document without a title was accepted")
	}
}

func TestServesJSON(t *testing.T) {
	t.Parallel()
	doc, err := openapi.New(openapi.Config{Title: "t", Version: "1"}, route())
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	doc.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	var got map[string]any
	if err := json.Unmarshal(rec.Body.Bytes(), &got); err != nil || got["openapi"] != "3.1.0" || rec.Header().Get("Content-Type") != "application/json" {
		t.Fatalf("served %s (%v)", rec.Body.Bytes(), err)
	}
}

// An application that sets its servers, license and contact gets a
// document that passes redocly's recommended rules without a warning.
func TestLintsCleanWithServersAndLicense(t *testing.T) {
	t.Parallel()
	doc, err := openapi.New(openapi.Config{Title: "Things API", Version: "1",
		Servers: []string{"https://api.example.test"},
		License: &openapi.License{Name: "Apache 2.0", Identifier: "Apache-2.0"},
		Contact: &openapi.Contact{Name: "Things team", Email: "things@example.test"}}, route())
	if err != nil {
		t.Fatal(err)
	}
	info := doc.T().Info
	if s := doc.T().Servers; len(s) != 1 || s[0].URL != "https://api.example.test" || info.License.Identifier != "Apache-2.0" ||
		info.Contact.Email != "things@example.test" {
		t.Fatalf("servers %v, info %+v", s, info)
	}
	redocly.Lint(t, doc.JSON())
}

func TestServersDefaultToRelative(t *testing.T) {
	t.Parallel()
	doc, err := openapi.New(openapi.Config{Title: "t", Version: "1"}, route())
	if err != nil {
		t.Fatal(err)
	}
	if s := doc.T().Servers; len(s) != 1 || s[0].URL != "/" {
		t.Fatalf("servers %v, want one server /", s)
	}
	if _, err := openapi.New(openapi.Config{Title: "t", Version: "1",
		License: &openapi.License{Name: "x", Identifier: "MIT", URL: "https://example.test/mit"}}, route()); err == nil {
		t.Fatal("a license with both an identifier and a URL was accepted")
	}
}

// TestServersWithAPath: a server URL with a path and route paths that
// carry it too (a collection mounted under that prefix names it in its
// BasePath) describe each operation once, relative to the server, so that
// the URL a client joins from server and path is the one served, not
// /shop/shop/…; route paths without the prefix are written as they are.
// A mix that no document can describe is an error.
func TestServersWithAPath(t *testing.T) {
	t.Parallel()
	under := func(prefix string) framework.RouteDescription {
		r := route()
		r.Path = prefix + r.Path
		return r
	}
	list := framework.DescribeGet("/shop/v1/things", "things.list", "List things", reflect.TypeFor[[]representation]())
	var docs []*openapi.Document
	for _, tc := range []struct {
		name    string
		servers []string
		routes  []framework.RouteDescription
	}{
		{"route paths with the prefix", []string{"https://api.example.test/shop", "/shop"}, []framework.RouteDescription{under("/shop"), list}},
		{"a server path with a trailing slash", []string{"/shop/"}, []framework.RouteDescription{under("/shop")}},
		{"route paths without it", []string{"https://api.example.test/shop"}, []framework.RouteDescription{route()}},
	} {
		doc, err := openapi.New(openapi.Config{Title: "t", Version: "1", Servers: tc.servers,
			License: &openapi.License{Name: "Apache 2.0", Identifier: "Apache-2.0"}}, tc.routes...)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if doc.T().Paths.Value("/v1/things/{id}") == nil || doc.T().Paths.Find("/shop/v1/things/{id}") != nil {
			t.Fatalf("%s: paths %v", tc.name, doc.T().Paths.InMatchingOrder())
		}
		if len(tc.routes) > 1 && doc.T().Paths.Value("/v1/things") == nil {
			t.Fatalf("%s: paths %v", tc.name, doc.T().Paths.InMatchingOrder())
		}
		router, err := legacy.NewRouter(doc.T())
		if err != nil {
			t.Fatal(err)
		}
		// The URL a client joins from the first server and the path.
		target := strings.TrimSuffix(tc.servers[0], "/") + "/v1/things/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f"
		if !strings.HasPrefix(target, "https://api.example.test/shop/") && !strings.HasPrefix(target, "/shop/") {
			t.Fatalf("%s: a client calls %s", tc.name, target)
		}
		req := httptest.NewRequest(http.MethodPost, target, nil)
		if route, _, err := router.FindRoute(req); err != nil || route.Operation.OperationID != "things.create" {
			t.Fatalf("%s: POST %s is not the described operation: %v", tc.name, target, err)
		}
		if u := doc.T().Servers[0].URL; u != strings.TrimSuffix(tc.servers[0], "/") {
			t.Fatalf("%s: server %s", tc.name, u)
		}
		docs = append(docs, doc)
	}

	for name, cfg := range map[string]struct {
		servers []string
		routes  []framework.RouteDescription
	}{
		"some route paths with the prefix":  {[]string{"/shop"}, []framework.RouteDescription{under("/shop"), framework.DescribeGet("/v1/x", "x", "x", nil)}},
		"servers with different paths":      {[]string{"/shop", "/store"}, []framework.RouteDescription{under("/shop")}},
		"one server with the path, one not": {[]string{"https://api.example.test/shop", "http://localhost:8080"}, []framework.RouteDescription{under("/shop")}},
	} {
		if _, err := openapi.New(openapi.Config{Title: "t", Version: "1", Servers: cfg.servers}, cfg.routes...); err == nil {
			t.Fatalf("%s: accepted", name)
		}
	}
	for _, doc := range docs {
		redocly.Lint(t, doc.JSON())
	}
}

// Problem is a type of the application's own that shares its name with
// the framework's problem body.
type Problem struct {
	Reason string `json:"reason"`
}

// TestComponentNames: a body's component is named by its Go type's name,
// without the package it is declared in ("command", not
// "openapi_test.command"); only names that two types share are qualified
// by their packages, and the framework's Problem keeps its name.
func TestComponentNames(t *testing.T) {
	t.Parallel()
	values := framework.DescribeGet("/v1/values", "values.get", "Values", reflect.TypeFor[url.Values]())
	problem := framework.DescribeGet("/v1/problem", "problem.get", "A problem of the application's own", reflect.TypeFor[Problem]())
	things := framework.DescribeGet("/v1/things", "things.list", "Things", reflect.TypeFor[Values]())
	doc, err := openapi.New(openapi.Config{Title: "t", Version: "1"}, route(), values, problem, things)
	if err != nil {
		t.Fatal(err)
	}
	got := slices.Sorted(maps.Keys(doc.T().Components.Schemas))
	if want := []string{"Problem", "command", "openapi_test.Problem", "openapi_test.Values", "representation", "url.Values"}; !slices.Equal(got, want) {
		t.Fatalf("components %v, want %v", got, want)
	}
}

// Values shares its name with url.Values.
type Values struct {
	N int `json:"n"`
}

// TestOpenAPI30 writes the same API in OpenAPI 3.0, for generators that
// read 3.0 only: what may be null is nullable: true (no type lists), the
// license's SPDX identifier is its URL, and the document loads and
// validates as 3.0 with kin-openapi and lints clean with redocly. An SPDX
// expression, which 3.0 cannot say, and an unknown version are refused.
func TestOpenAPI30(t *testing.T) {
	t.Parallel()
	patch := route()
	patch.Method, patch.OperationID, patch.Patch, patch.IdempotencyKey = http.MethodPatch, "things.patch", true, framework.KeyNone
	cfg := openapi.Config{Title: "Things API", Version: "1", Servers: []string{"https://api.example.test"},
		License: &openapi.License{Name: "Apache 2.0", Identifier: "Apache-2.0"}, OpenAPI: openapi.Version30}
	doc, err := openapi.New(cfg, route(), patch)
	if err != nil {
		t.Fatal(err)
	}
	body := doc.JSON()
	if strings.Contains(string(body), `"type":[`) || strings.Contains(string(body), `"null"`) {
		t.Fatalf("a type list or null type in the 3.0 document: %s", body)
	}
	loaded, err := openapi3.NewLoader().LoadFromData(body)
	if err != nil {
		t.Fatal(err)
	}
	if err := loaded.Validate(t.Context()); err != nil || loaded.OpenAPI != "3.0.3" || loaded.IsOpenAPI31OrLater() {
		t.Fatalf("OpenAPI %q: %v", loaded.OpenAPI, err)
	}
	if l := loaded.Info.License; l.URL != "https://spdx.org/licenses/Apache-2.0.html" || l.Identifier != "" {
		t.Fatalf("license %+v", l)
	}
	rep := loaded.Paths.Value("/v1/things/{id}").Post.Responses.Status(http.StatusCreated).Value.Content.Get("application/json").Schema.Value
	if cursor := rep.Properties["cursor"].Value; !cursor.Type.Is("string") || !cursor.Nullable {
		t.Fatalf("cursor (a *string) in 3.0: %+v", cursor)
	}
	if id := rep.Properties["id"].Value; id.Nullable {
		t.Fatal("id is nullable")
	}
	merge := loaded.Paths.Value("/v1/things/{id}").Patch.RequestBody.Value.Content.Get("application/merge-patch+json").Schema.Value
	if note := merge.Properties["note"].Value; !note.Type.Is("string") || !note.Nullable {
		t.Fatalf("a merge patch member in 3.0: %+v", note)
	}
	redocly.Lint(t, body)

	// The 3.1 document of the same routes is as before.
	cfg.OpenAPI = ""
	doc31, err := openapi.New(cfg, route(), patch)
	if err != nil {
		t.Fatal(err)
	}
	if cursor := doc31.T().Paths.Value("/v1/things/{id}").Post.Responses.Status(http.StatusCreated).Value.Content.Get("application/json").Schema.Value.Properties["cursor"].Value; doc31.T().OpenAPI != "3.1.0" || !cursor.Type.Includes("null") || cursor.Nullable {
		t.Fatalf("OpenAPI %s, cursor %+v", doc31.T().OpenAPI, cursor)
	}

	cfg.OpenAPI = openapi.Version30
	cfg.License = &openapi.License{Name: "MIT or Apache 2.0", Identifier: "MIT OR Apache-2.0"}
	if _, err := openapi.New(cfg, route()); err == nil {
		t.Fatal("an SPDX expression was accepted for OpenAPI 3.0")
	}
	cfg.License, cfg.OpenAPI = nil, "3.2.0"
	if _, err := openapi.New(cfg, route()); err == nil {
		t.Fatal("OpenAPI 3.2.0 was accepted")
	}
}

// TestResponseHeadersInAnyCase: a route may name a response header in any
// case (the POST fallback canonicalizes its stored headers: "Etag"); the
// document describes it under the framework's spelling, with its
// description, once.
func TestResponseHeadersInAnyCase(t *testing.T) {
	t.Parallel()
	r := route()
	r.Responses[0].Headers = []string{"Etag", "location", "IDEMPOTENT-REPLAYED", "X-Own"}
	doc, err := openapi.New(openapi.Config{Title: "t", Version: "1"}, r)
	if err != nil {
		t.Fatal(err)
	}
	got := doc.T().Paths.Value("/v1/things/{id}").Post.Responses.Status(http.StatusCreated).Value.Headers
	if names := slices.Sorted(maps.Keys(got)); !slices.Equal(names, []string{"ETag", "Idempotent-Replayed", "Location", "X-Own"}) {
		t.Fatalf("headers %v", names)
	}
	for _, h := range []string{"ETag", "Idempotent-Replayed", "Location"} {
		if got[h].Value.Description == "" {
			t.Fatalf("%s has no description", h)
		}
	}
}
