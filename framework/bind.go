package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"

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
type Checker interface{ Check() []FieldError }

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
	return &Binder{validate: v, maxDepth: cfg.MaxDepth, maxBodyBytes: cfg.MaxBodyBytes}, nil
}

// Validator exposes the underlying validator so that a resource can register
// custom tags at setup time.
func (b *Binder) Validator() *validator.Validate { return b.validate }

// ReadBody reads the request body up to the limit; a larger body fails with
// payload_too_large before it is read in full.
//
// A body declared as anything but JSON (application/json,
// application/*+json, with any parameters) is refused with
// unsupported_media_type before it is read; a missing Content-Type is read
// as JSON.
func (b *Binder) ReadBody(r *http.Request) ([]byte, error) {
	if ct := r.Header.Get(wire.HeaderContentType); !wire.IsJSONMediaType(ct) {
		return nil, Errorf(CodeUnsupportedMediaType, "the body must be JSON (application/json), not %q", ct)
	}
	if r.ContentLength > b.maxBodyBytes {
		return nil, Errorf(CodePayloadTooLarge, "body is larger than %d bytes", b.maxBodyBytes)
	}
	if r.Body == nil {
		return nil, nil
	}
	if r.ContentLength > 0 {
		// The server delivers exactly ContentLength bytes: one allocation.
		body := make([]byte, r.ContentLength)
		if _, err := io.ReadFull(r.Body, body); err != nil {
			return nil, &Error{Code: CodeMalformedJSON, Detail: "body could not be read", Err: err}
		}
		return body, nil
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, b.maxBodyBytes+1))
	if err != nil {
		return nil, &Error{Code: CodeMalformedJSON, Detail: "body could not be read", Err: err}
	}
	if int64(len(body)) > b.maxBodyBytes {
		return nil, Errorf(CodePayloadTooLarge, "body is larger than %d bytes", b.maxBodyBytes)
	}
	return body, nil
}

// Bind decodes body strictly into a T (no unknown fields, no duplicate keys,
// valid UTF-8, bounded depth), then applies [Defaulter], the validate tags,
// [Checker] and [Normalizer]. Errors are malformed_json or validation_failed
// *Error values.
func Bind[T any](b *Binder, body []byte) (T, error) {
	var cmd T
	if err := checkJSON(body, b.maxDepth); err != nil {
		return cmd, err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&cmd); err != nil {
		return cmd, decodeError(err)
	}
	if d, ok := any(&cmd).(Defaulter); ok {
		d.Default()
	}
	if err := b.validate.Struct(&cmd); err != nil {
		var verrs validator.ValidationErrors
		if !errors.As(err, &verrs) {
			return cmd, &Error{Code: CodeValidationFailed, Detail: "the command could not be validated", Err: err}
		}
		fields := make([]FieldError, 0, len(verrs))
		for _, fe := range verrs {
			fields = append(fields, FieldError{Field: fieldPath(fe.Namespace()), Reason: reason(fe)})
		}
		return cmd, &Error{Code: CodeValidationFailed, Detail: "the command has invalid fields", Fields: fields}
	}
	if c, ok := any(&cmd).(Checker); ok {
		if fields := c.Check(); len(fields) > 0 {
			return cmd, &Error{Code: CodeValidationFailed, Detail: "the command has invalid fields", Fields: fields}
		}
	}
	if n, ok := any(&cmd).(Normalizer); ok {
		n.Normalize()
	}
	return cmd, nil
}

func decodeError(err error) error {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		field := typeErr.Field
		return &Error{Code: CodeValidationFailed, Detail: "the command has invalid fields",
			Fields: []FieldError{{Field: field, Reason: "must be a " + typeErr.Type.String()}}}
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return &Error{Code: CodeValidationFailed, Detail: "the command has unknown fields",
			Fields: []FieldError{{Field: strings.Trim(name, `"`), Reason: "unknown field"}}}
	}
	return &Error{Code: CodeMalformedJSON, Detail: "body does not decode into the command", Err: err}
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
