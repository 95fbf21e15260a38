package framework

import (
	"net/http"
	"reflect"
	"time"

	"github.com/retrysafe/retrysafe/wire"
)

// RouteDescription describes one mounted route for machine-readable API
// descriptions: package framework/openapi turns a list of them into an
// OpenAPI document. Collections (collection.Collection.Describe), the legacy POST
// route, POST fallback operations and resources' own routes return them,
// so that a generator never reaches into their internals.
type RouteDescription struct {
	// Method is the HTTP method ("PUT").
	Method string
	// Path is the full path as a template, parameters in braces
	// ("/v1/orders/{id}").
	Path string
	// OperationID names the operation uniquely ("orders.put").
	OperationID string
	// Summary and Description are human-readable text.
	Summary     string
	Description string
	// Tags group operations (the resource's name).
	Tags []string
	// PathParams and Query are the route's parameters.
	PathParams []ParamDescription
	Query      []ParamDescription
	// Request is the type of the JSON request body (the typed command,
	// whose validate tags become the schema's constraints); nil when the
	// route takes no body.
	Request reflect.Type
	// Patch says the body is a patch of a Request rather than a Request:
	// an RFC 7396 merge patch (application/merge-patch+json or
	// application/json) or an RFC 6902 JSON Patch
	// (application/json-patch+json).
	Patch bool
	// IdempotencyKey says whether the route reads an Idempotency-Key
	// (or X-Idempotency-Key) header.
	IdempotencyKey KeyUse
	// IfMatch and IfNoneMatch say whether the route evaluates these
	// conditional request headers.
	IfMatch, IfNoneMatch bool
	// Authenticated routes require a bearer token (and may answer 401).
	Authenticated bool
	// Responses are the success (and other non-problem) answers.
	Responses []ResponseDescription
	// Problems are the problem codes the route may answer with; their
	// statuses come from the code registry ([Codes]).
	Problems []wire.Code
	// ProblemHeaders are headers that every problem answer of the route
	// carries as well (the legacy route's Deprecation and Link).
	ProblemHeaders []string
	// ReplayWindow is how long a stored answer is replayed (the engine's
	// [Retention.ReplayWindow]); zero when the route replays nothing.
	ReplayWindow time.Duration
	// Deprecated marks a route kept for migration only.
	Deprecated bool
}

// KeyUse says how a route uses an idempotency key header.
type KeyUse int

const (
	// KeyNone: the route ignores idempotency keys.
	KeyNone KeyUse = iota
	// KeyRequired: a request without a key is 400 idempotency_key_missing.
	KeyRequired
	// KeyOptional: a request without a key is executed without replay.
	KeyOptional
)

// ParamDescription is a path or query parameter.
type ParamDescription struct {
	Name        string
	Description string
	// Required parameters must be present (path parameters always are).
	Required bool
	// Type is "string" or "integer". Defaults to "string".
	Type string
	// Format is a string format ("uuid"), or "".
	Format string
	// Minimum and Maximum bound an integer, when set.
	Minimum, Maximum *int
}

// ResponseDescription is one non-problem answer of a route.
type ResponseDescription struct {
	Status      int
	Description string
	// Body is the type of the JSON body, nil for none (204, 304).
	Body reflect.Type
	// Headers are the response headers it may carry, among
	// [wire.HeaderIdempotencyKey], [wire.HeaderIdempotentReplayed], "Location",
	// "ETag", "Deprecation", "Link" and "Sunset".
	Headers []string
}

// ReplayResponseHeaders returns the headers a replayable answer may carry:
// Idempotent-Replayed, Location and ETag, plus extra.
func ReplayResponseHeaders(extra ...string) []string {
	return append([]string{wire.HeaderIdempotentReplayed, "Location", "ETag"}, extra...)
}

// ReadProblems are the problems every authenticated read may answer:
// unauthenticated, not_found, unavailable and internal.
func ReadProblems() []wire.Code {
	return []wire.Code{wire.CodeUnauthenticated, wire.CodeNotFound, wire.CodeUnavailable, wire.CodeInternal}
}

// WriteProblems are the problems every authenticated write with a JSON
// body may answer, before anything specific to the route.
func WriteProblems() []wire.Code {
	return []wire.Code{wire.CodeMalformedJSON, wire.CodeValidationFailed, wire.CodeUnauthenticated, wire.CodePayloadTooLarge, wire.CodeUnsupportedMediaType,
		wire.CodeRequestInProgress, wire.CodeUnavailable, wire.CodeInternal}
}

// DescribeGet describes a plain authenticated GET of one JSON document of
// type body (a resource's own read route), with ETag when etag is set.
// A route with path parameters may answer 400 invalid_resource_id: text
// a database cannot store is refused there (server.StorableText).
func DescribeGet(path, operationID, summary string, body reflect.Type, params ...ParamDescription) RouteDescription {
	problems := ReadProblems()
	if len(params) > 0 {
		problems = append(problems, wire.CodeInvalidResourceID)
	}
	return RouteDescription{
		Method: http.MethodGet, Path: path, OperationID: operationID, Summary: summary,
		PathParams: params, Authenticated: true,
		Responses: []ResponseDescription{{Status: http.StatusOK, Description: "the current representation", Body: body}},
		Problems:  problems,
	}
}
