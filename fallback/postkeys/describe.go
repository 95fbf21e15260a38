package postkeys

import (
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strings"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// Describe returns the description of the operation mounted at path (for
// example "/v1/transfers", or "/v1/invoices/{id}/emails" with a path
// parameter in braces, described as a string: set a format or a
// description on the result's PathParams), for an API description
// (package framework/openapi). status is the status of its success answer
// and response a value of its body's type (a zero Transfer{}); the
// problems follow from the declaration: the key policy, the mode (a
// phased operation may answer 409 outcome_pending), the RejectionCodes,
// which are stored and replayed like a success, and the operation's other
// [Operation.Problems].
func (e *Endpoint[Cmd]) Describe(path string, status int, response any) framework.RouteDescription {
	op := e.op
	stored := []string{wire.HeaderIdempotencyKey, wire.HeaderIdempotentReplayed}
	for _, h := range e.a.cfg.StoredHeaders {
		if h != "Content-Type" {
			stored = append(stored, h)
		}
	}
	keyUse := framework.KeyRequired
	problems := append(framework.WriteProblems(), wire.CodeIdempotencyKeyInvalid, wire.CodeIdempotencyKeyReuse)
	if op.keyPolicy == KeyOptional {
		keyUse = framework.KeyOptional
	} else {
		problems = append(problems, wire.CodeIdempotencyKeyMissing)
	}
	if op.mode == Phased {
		problems = append(problems, wire.CodeOutcomePending)
	}
	problems = append(problems, slices.Sorted(maps.Keys(op.rejections))...)
	problems = append(problems, op.problems...)
	var params []framework.ParamDescription
	for _, seg := range strings.Split(path, "/") {
		if name, ok := strings.CutPrefix(seg, "{"); ok {
			params = append(params, framework.ParamDescription{Name: strings.TrimSuffix(name, "}"), Required: true})
		}
	}
	if len(params) > 0 {
		// Text a database cannot store is refused in a path
		// ([server.StorableText]).
		problems = append(problems, wire.CodeInvalidResourceID)
	}
	var body reflect.Type
	if response != nil {
		body = reflect.TypeOf(response)
	}
	return framework.RouteDescription{
		Method: http.MethodPost, Path: path, OperationID: op.name, Summary: op.name,
		Description: "Runs once per Idempotency-Key; a retry with the same key and body gets the stored answer " +
			"(success or business rejection) byte for byte, with Idempotent-Replayed: true. The same key with another body is 422 idempotency_key_reuse.",
		PathParams: params, Request: reflect.TypeFor[Cmd](), IdempotencyKey: keyUse, Authenticated: true,
		ReplayWindow: e.a.engine.Retention().ReplayWindow,
		Responses:    []framework.ResponseDescription{{Status: status, Body: body, Headers: stored}},
		Problems:     problems,
		// The key is echoed on every answer once it was read, and stored
		// rejections are replayed.
		ProblemHeaders: []string{wire.HeaderIdempotencyKey, wire.HeaderIdempotentReplayed},
	}
}
