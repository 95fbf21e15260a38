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
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/wire"
)

// DefaultMaxDepth is the nesting bound of request JSON when none is set.
const DefaultMaxDepth = 32

// MaxNumberLength bounds the spelling of one JSON number in a request body,
// in bytes (sign, digits, point and exponent). A longer number is rejected
// before anything parses it with arbitrary precision: no int64, no float64
// and no price needs more, and a million-digit number would otherwise cost
// seconds of CPU.
const MaxNumberLength = 64

// checkJSON rejects what encoding/json would silently accept or choke on,
// and what a database cannot store: invalid UTF-8, an unpaired surrogate
// escape ("\ud800", which a decoder turns into U+FFFD, so that "c\ud800"
// and "c\ufffd" would bind alike; RFC 7493 forbids it), duplicate object
// keys (compared after unescaping), nesting deeper than maxDepth, and
// anything but exactly one JSON value are malformed_json; a string holding
// NUL (which PostgreSQL text cannot store) and a number longer than
// [MaxNumberLength] are validation_failed on their field. It returns an
// *Error. A valid document takes scanJSON's single pass; the rest, and any
// document that may hold a NUL or an overlong number, takes
// checkJSONTokens, which names the fault and its field. A check added here
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
	if topLevel == 0 {
		return Errorf(wire.CodeMalformedJSON, "body is empty")
	}
	return nil
}

// unpairedSurrogateDetail is checkJSON's answer to a string that spells
// half a UTF-16 surrogate pair.
const unpairedSurrogateDetail = `a string holds an unpaired UTF-16 surrogate escape such as \ud800, which is not text (RFC 7493)`

// unpairedSurrogate reports whether the escapes in b, the bytes of a valid
// JSON string (quoted, with or without delimiters before it), spell a
// surrogate that is not half of a high-low pair.
func unpairedSurrogate(b []byte) bool {
	start := bytes.IndexByte(b, '\\')
	if start < 0 {
		return false
	}
	for i := start; i < len(b); i++ {
		if b[i] != '\\' {
			continue
		}
		i++ // the escape's letter
		if b[i] != 'u' {
			continue
		}
		r := hex4(b[i+1 : i+5])
		i += 4
		if !utf16.IsSurrogate(r) {
			continue
		}
		// A high surrogate and a low one after it are one character.
		if i+6 < len(b) && b[i+1] == '\\' && b[i+2] == 'u' && utf16.DecodeRune(r, hex4(b[i+3:i+7])) != unicode.ReplacementChar {
			i += 6
			continue
		}
		return true
	}
	return false
}

// hex4 decodes the four hexadecimal digits of a \u escape.
func hex4(b []byte) rune {
	var r rune
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
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

func fieldError(field, reason string) *Error {
	return &Error{Code: wire.CodeValidationFailed, Detail: "the command has invalid fields",
		Fields: []wire.FieldError{{Field: field, Reason: reason}}}
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
	if len(s) > MaxNumberLength {
		return "", fmt.Errorf("canonical JSON: a number longer than %d characters", MaxNumberLength)
	}
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
