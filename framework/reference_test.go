package framework

// The references the one JSON check (checkJSON) and the canonical form
// (appendCanonical) are tested against: a walk through encoding/json's
// tokens and a decode into map[string]any. They share none of the code
// they check.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/wire"
)

// checkJSONTokens is checkJSON by a walk through json.Decoder's tokens:
// the reference checkJSON is tested against. Token reports the end of the
// input inside a container as io.EOF, which the walk takes for the end of
// a document that is cut short.
func checkJSONTokens(body []byte, maxDepth int) error {
	if !utf8.Valid(body) {
		return Errorf(wire.CodeMalformedJSON, "body is not valid UTF-8")
	}
	var (
		stack    []jsonFrame
		topLevel int
	)
	valueDone := func() {
		if n := len(stack); n > 0 {
			if stack[n-1].object {
				stack[n-1].expectKey = true
			} else {
				stack[n-1].index++
			}
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		// body[from:dec.InputOffset()] is the token and the delimiters
		// before it, which hold no backslash.
		from := dec.InputOffset()
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &Error{Code: wire.CodeMalformedJSON, Detail: "body is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
		}
		if len(stack) == 0 {
			if topLevel++; topLevel > 1 {
				return Errorf(wire.CodeMalformedJSON, "body holds more than one JSON value")
			}
		}
		if _, ok := tok.(string); ok && unpairedSurrogate(body[from:dec.InputOffset()]) {
			return Errorf(wire.CodeMalformedJSON, unpairedSurrogateDetail)
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= maxDepth {
					return Errorf(wire.CodeMalformedJSON, "JSON nesting is deeper than %d", maxDepth)
				}
				stack = append(stack, jsonFrame{object: t == '{', expectKey: t == '{'})
			default:
				stack = stack[:len(stack)-1]
				valueDone()
			}
		case string:
			if n := len(stack); n > 0 && stack[n-1].object && stack[n-1].expectKey {
				top := &stack[n-1]
				if top.keys == nil {
					top.keys = make(map[string]struct{})
				}
				if _, dup := top.keys[t]; dup {
					return Errorf(wire.CodeMalformedJSON, "duplicate object key %q", t)
				}
				top.keys[t] = struct{}{}
				top.key = t
				top.expectKey = false
				if strings.IndexByte(t, 0) >= 0 {
					return fieldError(jsonPath(stack), "must not contain NUL characters")
				}
				continue
			}
			if strings.IndexByte(t, 0) >= 0 {
				return fieldError(jsonPath(stack), "must not contain NUL characters")
			}
			valueDone()
		case json.Number:
			if len(t) > MaxNumberLength {
				return fieldError(jsonPath(stack), fmt.Sprintf("a number of at most %d characters", MaxNumberLength))
			}
			valueDone()
		default:
			valueDone()
		}
	}
	if len(stack) > 0 {
		return Errorf(wire.CodeMalformedJSON, "body is not valid JSON: unexpected EOF")
	}
	if topLevel == 0 {
		return Errorf(wire.CodeMalformedJSON, "body is empty")
	}
	return nil
}

// jsonFrame is one open object or array of checkJSON's walk.
type jsonFrame struct {
	object    bool
	expectKey bool
	keys      map[string]struct{}
	key       string // the current member of an object
	index     int    // the current element of an array
}

// jsonPath names the value being read in the error style of validation
// failures: "items[0].sku"; the top level is "body". A NUL in a key is
// spelled \u0000.
func jsonPath(stack []jsonFrame) string {
	var b strings.Builder
	for _, f := range stack {
		if f.object {
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			b.WriteString(strings.ReplaceAll(f.key, "\x00", `\u0000`))
		} else {
			b.WriteString("[" + strconv.Itoa(f.index) + "]")
		}
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// canonicalJSON rewrites one JSON value in canonical form (see
// canonical.go): by appendCanonical when it is valid JSON, else by the
// reference.
func canonicalJSON(raw []byte) ([]byte, error) {
	if !json.Valid(raw) {
		return canonicalJSONDecoded(raw)
	}
	canon, err := appendCanonical(nil, raw)
	if err != nil {
		return nil, err
	}
	return canon, nil
}

// canonicalJSONDecoded is canonicalJSON by a decode into map[string]any:
// the reference for appendCanonical, which also takes input that is not
// one valid JSON document (its first value counts).
func canonicalJSONDecoded(raw []byte) ([]byte, error) {
	v, err := decodeNumbers(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// decodeNumbers decodes the first JSON value of raw, its numbers as
// json.Number.
func decodeNumbers(raw []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	return v, err
}

func writeCanonical(buf *bytes.Buffer, v any) error {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case bool:
		buf.WriteString(strconv.FormatBool(t))
	case json.Number:
		n, err := canonicalNumber(string(t))
		if err != nil {
			return err
		}
		buf.WriteString(n)
	case string:
		b, err := json.Marshal(t)
		if err != nil {
			return err
		}
		buf.Write(b)
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			if err := writeCanonical(buf, e); err != nil {
				return err
			}
		}
		buf.WriteByte(']')
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			kb, err := json.Marshal(k)
			if err != nil {
				return err
			}
			buf.Write(kb)
			buf.WriteByte(':')
			if err := writeCanonical(buf, t[k]); err != nil {
				return err
			}
		}
		buf.WriteByte('}')
	default:
		return fmt.Errorf("canonical JSON: unexpected %T", v)
	}
	return nil
}
