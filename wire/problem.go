package wire

import (
	"encoding/json"
	"mime"
	"strings"
)

// FieldError is one entry of the "errors" extension of a validation_failed
// problem.
type FieldError struct {
	Field  string `json:"field"`
	Reason string `json:"reason"`
}

// Problem is the RFC 9457 body of every error answer: the standard members,
// the stable Code and, for validation_failed, the failing fields.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Code   Code         `json:"code"`
	Errors []FieldError `json:"errors,omitempty"`

	// Extensions holds every member of a decoded body, standard ones
	// included; [ParseProblem] fills it. It is never sent.
	Extensions map[string]json.RawMessage `json:"-"`
}

// ProblemType is the "type" URI of a code.
func ProblemType(c Code) string { return "urn:retrysafe:problem:" + string(c) }

// ParseProblem decodes body when contentType is a JSON media type
// (application/problem+json, or application/json carrying a code, title or
// type) and the body is a JSON object. It returns nil otherwise.
func ParseProblem(contentType string, body []byte) *Problem {
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil || (mt != ContentTypeProblem && mt != ContentTypeJSON) {
		return nil
	}
	var p Problem
	if err := json.Unmarshal(body, &p); err != nil {
		return nil
	}
	if err := json.Unmarshal(body, &p.Extensions); err != nil {
		return nil
	}
	if mt == ContentTypeJSON && p.Code == "" && p.Title == "" && p.Type == "" {
		return nil
	}
	return &p
}

// IsJSONMediaType reports whether a request's Content-Type names JSON:
// application/json or application/*+json, with any parameters (charset).
// An empty Content-Type is accepted: the body is read as JSON.
func IsJSONMediaType(contentType string) bool {
	if contentType == "" {
		return true
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		return false
	}
	if mt == ContentTypeJSON {
		return true
	}
	sub, ok := strings.CutPrefix(mt, "application/")
	return ok && len(sub) > len("+json") && strings.HasSuffix(sub, "+json")
}
