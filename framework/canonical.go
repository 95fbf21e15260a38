package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// DefaultMaxDepth is the nesting bound of request JSON when none is set.
const DefaultMaxDepth = 32

// checkJSON rejects what encoding/json would silently accept or choke on:
// invalid UTF-8, duplicate object keys (compared after unescaping), nesting
// deeper than maxDepth, and anything but exactly one JSON value. It returns
// a malformed_json *Error. A valid document takes scanJSON's single pass;
// the rest takes checkJSONTokens, which names the fault. A check added here
// must be added to both (TestCheckJSONFastPathAgrees compares them).
func checkJSON(body []byte, maxDepth int) error {
	if err := scanJSON(body, maxDepth); err != errNotScanned {
		return err
	}
	return checkJSONTokens(body, maxDepth)
}

// checkJSONTokens is checkJSON by a walk through json.Decoder's tokens: the
// reference for scanJSON, and the path that explains invalid documents.
func checkJSONTokens(body []byte, maxDepth int) error {
	if !utf8.Valid(body) {
		return Errorf(CodeMalformedJSON, "body is not valid UTF-8")
	}
	type frame struct {
		object    bool
		expectKey bool
		keys      map[string]struct{}
	}
	var (
		stack    []frame
		topLevel int
	)
	valueDone := func() {
		if n := len(stack); n > 0 && stack[n-1].object {
			stack[n-1].expectKey = true
		}
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return &Error{Code: CodeMalformedJSON, Detail: "body is not valid JSON: " + strings.TrimPrefix(err.Error(), "json: ")}
		}
		if len(stack) == 0 {
			if topLevel++; topLevel > 1 {
				return Errorf(CodeMalformedJSON, "body holds more than one JSON value")
			}
		}
		switch t := tok.(type) {
		case json.Delim:
			switch t {
			case '{', '[':
				if len(stack) >= maxDepth {
					return Errorf(CodeMalformedJSON, "JSON nesting is deeper than %d", maxDepth)
				}
				stack = append(stack, frame{object: t == '{', expectKey: t == '{'})
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
					return Errorf(CodeMalformedJSON, "duplicate object key %q", t)
				}
				top.keys[t] = struct{}{}
				top.expectKey = false
				continue
			}
			valueDone()
		default:
			valueDone()
		}
	}
	if topLevel == 0 {
		return Errorf(CodeMalformedJSON, "body is empty")
	}
	return nil
}

// CanonicalJSON rewrites one JSON value in canonical form: object keys
// sorted by their UTF-8 bytes, no insignificant whitespace, strings in
// encoding/json's escaping, and every number in one spelling (4200, 4200.0
// and 4.2e3 all become 42e2). Two documents that mean the same give the same
// bytes. The input must already be valid JSON.
func CanonicalJSON(raw []byte) ([]byte, error) {
	if json.Valid(raw) {
		return appendCanonical(nil, raw)
	}
	return canonicalJSONDecoded(raw)
}

// canonicalJSONDecoded is CanonicalJSON by a decode into map[string]any:
// the reference for appendCanonical, and the path for input that is not
// one valid JSON document (its first value counts).
func canonicalJSONDecoded(raw []byte) ([]byte, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := writeCanonical(&buf, v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
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

// canonicalNumber writes a JSON number as its significant digits with
// trailing zeros folded into an exponent: "-0.50" → "-5e-1", "4200" →
// "42e2", "0" and "-0.0" → "0".
func canonicalNumber(s string) (string, error) {
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	mantissa, expPart, hasExp := strings.Cut(strings.ToLower(s), "e")
	exp := 0
	if hasExp {
		e, err := strconv.Atoi(expPart)
		if err != nil {
			return "", fmt.Errorf("canonical JSON: exponent out of range in %q", s)
		}
		exp = e
	}
	intPart, frac, _ := strings.Cut(mantissa, ".")
	digits := strings.TrimLeft(intPart+frac, "0")
	trimmed := strings.TrimRight(digits, "0")
	if trimmed == "" {
		return "0", nil
	}
	zeros := len(digits) - len(trimmed)
	if exp < math.MinInt+len(frac) || exp > math.MaxInt-zeros {
		return "", fmt.Errorf("canonical JSON: exponent out of range in %q", s)
	}
	exp += zeros - len(frac)
	var b strings.Builder
	if neg {
		b.WriteByte('-')
	}
	b.WriteString(trimmed)
	if exp != 0 {
		b.WriteByte('e')
		b.WriteString(strconv.Itoa(exp))
	}
	return b.String(), nil
}
