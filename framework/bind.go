package framework

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/go-playground/validator/v10"

	"github.com/retrysafe/retrysafe/wire"
)

// DefaultMaxBodyBytes is the request body limit when none is set: 1 MiB.
const DefaultMaxBodyBytes = 1 << 20

// Defaulter is implemented by commands that fill in defaults after decoding
// and before validation.
type Defaulter interface{ Default() }

// Checker is implemented by commands with rules that validate tags cannot
// express. Check runs after the tags pass; a non-empty result fails the
// request with validation_failed.
type Checker interface{ Check() []wire.FieldError }

// Normalizer is implemented by commands that rewrite valid values into one
// canonical form ("10.0" and "10.00" into the same price) so that requests
// that mean the same have the same fingerprint. It runs last.
type Normalizer interface{ Normalize() }

// Binder turns a request body into a validated command. One Binder serves
// the PUT engine and the POST fallback alike.
type Binder struct {
	validate     *validator.Validate
	maxDepth     int
	maxBodyBytes int64
	// decode are the options of the decode into a command: exact member
	// names, and every integer field bound as [Integer] binds.
	decode jsonv2.Options
}

// BinderConfig configures [NewBinder].
type BinderConfig struct {
	// MaxDepth bounds JSON nesting. Defaults to [DefaultMaxDepth].
	MaxDepth int
	// MaxBodyBytes bounds the request body. Defaults to [DefaultMaxBodyBytes].
	MaxBodyBytes int64
}

// NewBinder returns a Binder whose validation errors name fields by their
// JSON names.
func NewBinder(cfg BinderConfig) (*Binder, error) {
	if cfg.MaxDepth < 0 || cfg.MaxBodyBytes < 0 {
		return nil, errors.New("framework: MaxDepth and MaxBodyBytes must not be negative")
	}
	if cfg.MaxDepth == 0 {
		cfg.MaxDepth = DefaultMaxDepth
	}
	if cfg.MaxBodyBytes == 0 {
		cfg.MaxBodyBytes = DefaultMaxBodyBytes
	}
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		if name == "" {
			return f.Name
		}
		return name
	})
	return &Binder{validate: v, maxDepth: cfg.MaxDepth, maxBodyBytes: cfg.MaxBodyBytes,
		decode: jsonv2.JoinOptions(jsonv2.RejectUnknownMembers(true), jsonv2.WithUnmarshalers(integerUnmarshalers()))}, nil
}

// Validator exposes the underlying validator so that a resource can register
// custom tags at setup time.
func (b *Binder) Validator() *validator.Validate { return b.validate }

// MaxBodyBytes is the binder's bound of a request body.
func (b *Binder) MaxBodyBytes() int64 { return b.maxBodyBytes }

// CheckJSON reports, as a 400 malformed_json problem, a body that is not
// one well-formed JSON value within the binder's nesting bound (a PATCH
// document, checked before it is applied).
func (b *Binder) CheckJSON(body []byte) error { return checkJSON(body, b.maxDepth) }

// ReadBody reads the request body up to the limit; a larger body fails with
// payload_too_large before it is read in full.
//
// A body declared as anything but JSON (application/json,
// application/*+json, with any parameters) is refused with
// unsupported_media_type before it is read; a missing Content-Type is read
// as JSON.
func (b *Binder) ReadBody(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get(wire.HeaderContentType); !wire.IsJSONMediaType(ct) {
		return nil, Errorf(wire.CodeUnsupportedMediaType, "the body must be JSON (application/json), not %q", ct)
	}
	if r.ContentLength > b.maxBodyBytes {
		return nil, Errorf(wire.CodePayloadTooLarge, "body is larger than %d bytes", b.maxBodyBytes)
	}
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > 0 {
		// The server delivers exactly ContentLength bytes: one allocation.
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, &Error{Code: wire.CodeMalformedJSON, Detail: "body could not be read", Err: err}
		}
		return body, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, b.maxBodyBytes+1))
	if err != nil {
		return nil, &Error{Code: wire.CodeMalformedJSON, Detail: "body could not be read", Err: err}
	}
	if int64(len(body)) > b.maxBodyBytes {
		return nil, Errorf(wire.CodePayloadTooLarge, "body is larger than %d bytes", b.maxBodyBytes)
	}
	return body, nil
}

// Bind decodes body strictly into a T, then applies [Defaulter], the
// validate tags, [Checker] and [Normalizer]. Errors are malformed_json or
// validation_failed *Error values.
//
// Bind is the one place that decides how a body binds, for the PUT engine,
// the legacy POST route and every POST operation of fallback/postkeys. The
// body must be one JSON value of valid UTF-8 with no duplicate keys, no
// unpaired surrogate escape and nesting no deeper than the Binder's bound
// (else malformed_json); no string may hold NUL and no number be longer
// than [MaxNumberLength] (else validation_failed on the field). A member
// binds to a field only when its name is exactly the field's JSON name: one
// that differs in case or by a Unicode case fold ("Amount", "cuſtomer") is
// an unknown field, validation_failed naming it with its path
// ("items[0].QUANTITY"), as is any other member the command does not have.
// Every integer field, of any Go integer type and at any depth, takes
// every JSON spelling of an integer (2, 2.0, 2e0, 0.2e1) as one value, so
// that they have one fingerprint; a fraction or a value out of the field's
// range is validation_failed ("must be an integer from 0 to 255").
func Bind[T any](b *Binder, body []byte) (T, error) {
	var cmd T
	if err := checkJSON(body, b.maxDepth); err != nil {
		return cmd, err
	}
	if err := jsonv2.Unmarshal(body, &cmd, b.decode); err != nil {
		return cmd, decodeError(body, err)
	}
	if d, ok := any(&cmd).(Defaulter); ok {
		d.Default()
	}
	if err := b.validate.Struct(&cmd); err != nil {
		var verrs validator.ValidationErrors
		if !errors.As(err, &verrs) {
			return cmd, &Error{Code: wire.CodeValidationFailed, Detail: "the command could not be validated", Err: err}
		}
		fields := make([]wire.FieldError, 0, len(verrs))
		for _, fe := range verrs {
			fields = append(fields, wire.FieldError{Field: fieldPath(fe.Namespace()), Reason: reason(fe)})
		}
		return cmd, &Error{Code: wire.CodeValidationFailed, Detail: "the command has invalid fields", Fields: fields}
	}
	if c, ok := any(&cmd).(Checker); ok {
		if fields := c.Check(); len(fields) > 0 {
			return cmd, &Error{Code: wire.CodeValidationFailed, Detail: "the command has invalid fields", Fields: fields}
		}
	}
	if n, ok := any(&cmd).(Normalizer); ok {
		n.Normalize()
	}
	return cmd, nil
}

// decodeError maps an error of the decode into the command: a member the
// command does not have and a value of the wrong type are validation_failed
// on their path; anything else (checkJSON has already refused every
// malformed body) is malformed_json.
func decodeError(body []byte, err error) error {
	var semErr *jsonv2.SemanticError
	if !errors.As(err, &semErr) || semErr.GoType == nil {
		return &Error{Code: wire.CodeMalformedJSON, Detail: "body does not decode into the command", Err: err}
	}
	if errors.Is(semErr.Err, jsonv2.ErrUnknownName) {
		return &Error{Code: wire.CodeValidationFailed, Detail: "the command has unknown fields",
			Fields: []wire.FieldError{{Field: pointerPath(body, semErr.JSONPointer), Reason: "unknown field"}}}
	}
	reason := "must be a " + semErr.GoType.String()
	if intErr := (*integerError)(nil); errors.As(err, &intErr) {
		reason = intErr.Error()
	} else if typeErr := (*json.UnmarshalTypeError)(nil); errors.As(err, &typeErr) {
		// A custom unmarshaler names the type it wanted.
		reason = "must be a " + typeErr.Type.String()
	}
	return &Error{Code: wire.CodeValidationFailed, Detail: "the command has invalid fields",
		Fields: []wire.FieldError{{Field: pointerPath(body, semErr.JSONPointer), Reason: reason}}}
}

// pointerPath spells the JSON Pointer ptr into body in the style of
// validation failures, as jsonPath does: "/items/0/QUANTITY" is
// "items[0].QUANTITY"; the top level is "body". Whether "0" is an index or
// a member name is read from body. It runs on errors only.
func pointerPath(body []byte, ptr jsontext.Pointer) string {
	var b strings.Builder
	value := jsontext.Value(body)
	for name := range ptr.Tokens() {
		if value.Kind() == '[' {
			var elems []jsontext.Value
			_ = jsonv2.Unmarshal(value, &elems)
			b.WriteString("[" + name + "]")
			if i, err := strconv.Atoi(name); err == nil && i >= 0 && i < len(elems) {
				value = elems[i]
			}
			continue
		}
		var members map[string]jsontext.Value
		_ = jsonv2.Unmarshal(value, &members)
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(name)
		value = members[name]
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// fieldPath drops the struct name from a validator namespace:
// "Order.items[0].quantity" → "items[0].quantity".
func fieldPath(ns string) string {
	if _, rest, ok := strings.Cut(ns, "."); ok {
		return rest
	}
	return ns
}

func reason(fe validator.FieldError) string {
	if fe.Param() != "" {
		return fmt.Sprintf("%s=%s", fe.Tag(), fe.Param())
	}
	return fe.Tag()
}
