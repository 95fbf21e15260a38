package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/wire"
)

// The fast paths of checkJSON and CanonicalJSON: one pass over the bytes of
// a document that encoding/json already found valid (json.Valid, no
// allocation), instead of a walk through json.Decoder's tokens or a decode
// into map[string]any. They give exactly the answers and bytes of the token
// walk and of the map-based canonical form, which stay as the reference and
// as the path for invalid input (where their error messages are the ones a
// client sees); the tests compare both on a corpus.

// errNotScanned tells the caller to take the reference path.
var errNotScanned = errors.New("framework: not scanned")

// scanJSON runs checkJSON's checks on a valid document (json.Valid accepts
// an unpaired surrogate escape: scanJSON refuses it). It returns
// errNotScanned when body is not valid UTF-8 or not valid JSON, and when it
// may hold a NUL (only the escape \u0000 can spell one in valid JSON) or a
// number longer than [MaxNumberLength]: the reference path then names the
// fault and its field.
func scanJSON(body []byte, maxDepth int) error {
	if !utf8.Valid(body) || !json.Valid(body) || bytes.Contains(body, []byte(`\u0000`)) {
		return errNotScanned
	}
	var keys [16][]byte
	s := scanner{body: body, maxDepth: maxDepth, keys: keys[:0]}
	return s.value(0)
}

type scanner struct {
	body     []byte
	i        int
	maxDepth int
	// keys holds the unescaped keys of the open objects, each object's
	// after the previous one's: small objects need no map. An unescaped
	// key is a slice of body.
	keys [][]byte
}

func (s *scanner) skipSpace() {
	for s.i < len(s.body) {
		switch s.body[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// value scans one value at nesting depth (the number of open containers).
func (s *scanner) value(depth int) error {
	s.skipSpace()
	switch c := s.body[s.i]; c {
	case '{', '[':
		if depth >= s.maxDepth {
			return Errorf(wire.CodeMalformedJSON, "JSON nesting is deeper than %d", s.maxDepth)
		}
		s.i++
		if c == '{' {
			return s.object(depth + 1)
		}
		return s.array(depth + 1)
	case '"':
		start := s.i
		var escaped bool
		s.i, escaped = stringEnd(s.body, s.i)
		if escaped && unpairedSurrogate(s.body[start:s.i]) {
			return Errorf(wire.CodeMalformedJSON, unpairedSurrogateDetail)
		}
	default: // a number or a literal
		start := s.i
	scan:
		for s.i < len(s.body) {
			switch s.body[s.i] {
			case ',', ']', '}', ' ', '\t', '\n', '\r':
				break scan
			}
			s.i++
		}
		if s.i-start > MaxNumberLength {
			return errNotScanned
		}
	}
	return nil
}

// stringEnd returns the position after the string that starts at b[i]
// (its opening quote) and whether it holds an escape.
func stringEnd(b []byte, i int) (end int, escaped bool) {
	for i++; ; i++ {
		switch b[i] {
		case '\\':
			escaped = true
			i++
		case '"':
			return i + 1, escaped
		}
	}
}

func (s *scanner) object(depth int) error {
	base := len(s.keys)
	err := s.members(base, depth)
	s.keys = s.keys[:base]
	return err
}

// members scans an object's members; its keys go to s.keys after base.
func (s *scanner) members(base, depth int) error {
	s.skipSpace()
	if s.body[s.i] == '}' {
		s.i++
		return nil
	}
	for {
		s.skipSpace()
		start := s.i
		var escaped bool
		s.i, escaped = stringEnd(s.body, s.i)
		key := s.body[start+1 : s.i-1]
		if escaped {
			if unpairedSurrogate(s.body[start:s.i]) {
				return Errorf(wire.CodeMalformedJSON, unpairedSurrogateDetail)
			}
			var k string
			_ = json.Unmarshal(s.body[start:s.i], &k)
			key = []byte(k)
		}
		for _, k := range s.keys[base:] {
			if bytes.Equal(k, key) {
				return Errorf(wire.CodeMalformedJSON, "duplicate object key %q", key)
			}
		}
		s.keys = append(s.keys, key)
		s.skipSpace()
		s.i++ // ':'
		if err := s.value(depth); err != nil {
			return err
		}
		s.skipSpace()
		if s.body[s.i] == '}' {
			s.i++
			return nil
		}
		s.i++ // ','
	}
}

func (s *scanner) array(depth int) error {
	s.skipSpace()
	if s.body[s.i] == ']' {
		s.i++
		return nil
	}
	for {
		if err := s.value(depth); err != nil {
			return err
		}
		s.skipSpace()
		if s.body[s.i] == ']' {
			s.i++
			return nil
		}
		s.i++ // ','
	}
}

// appendCanonical appends the canonical form of the valid JSON document
// raw to dst (see [CanonicalJSON]).
func appendCanonical(dst, raw []byte) ([]byte, error) {
	c := canonicalizer{raw: raw, buf: dst}
	err := c.value()
	return c.buf, err
}

// canonicalizer writes the canonical form of raw to buf. An object's
// members are written to the end of buf as they come, then once more in
// key order, and the sorted copy is moved down over the first.
type canonicalizer struct {
	raw     []byte
	i       int
	buf     []byte
	members []member
}

// member is one object member: its unescaped key, and where its canonical
// "key":value lies in buf.
type member struct {
	key        []byte
	start, end int
}

func (c *canonicalizer) skipSpace() {
	for c.i < len(c.raw) {
		switch c.raw[c.i] {
		case ' ', '\t', '\n', '\r':
			c.i++
		default:
			return
		}
	}
}

func (c *canonicalizer) value() error {
	c.skipSpace()
	switch c.raw[c.i] {
	case '{':
		c.i++
		return c.object()
	case '[':
		c.i++
		return c.array()
	case '"':
		start := c.i
		var escaped bool
		c.i, escaped = stringEnd(c.raw, c.i)
		return c.appendString(c.raw[start:c.i], escaped)
	case 't':
		c.i += 4
		c.buf = append(c.buf, "true"...)
		return nil
	case 'f':
		c.i += 5
		c.buf = append(c.buf, "false"...)
		return nil
	case 'n':
		c.i += 4
		c.buf = append(c.buf, "null"...)
		return nil
	}
	start := c.i
	for c.i < len(c.raw) && !isDelimiter(c.raw[c.i]) {
		c.i++
	}
	num := c.raw[start:c.i]
	// A number over MaxNumberLength goes to canonicalNumber, which
	// refuses it, even when it is already canonical.
	if len(num) <= MaxNumberLength && isCanonicalInteger(num) {
		c.buf = append(c.buf, num...)
		return nil
	}
	n, err := canonicalNumber(string(num))
	if err != nil {
		return err
	}
	c.buf = append(c.buf, n...)
	return nil
}

func isDelimiter(b byte) bool {
	switch b {
	case ',', ']', '}', ' ', '\t', '\n', '\r':
		return true
	}
	return false
}

// isCanonicalInteger reports whether num is already in canonical form: a
// non-negative integer without leading or trailing zeros ("0" aside).
func isCanonicalInteger(num []byte) bool {
	if len(num) == 1 && num[0] >= '0' && num[0] <= '9' {
		return true
	}
	if len(num) == 0 || num[0] == '0' || num[len(num)-1] == '0' {
		return false
	}
	for _, b := range num {
		if b < '0' || b > '9' {
			return false
		}
	}
	return true
}

func (c *canonicalizer) array() error {
	c.buf = append(c.buf, '[')
	c.skipSpace()
	if c.raw[c.i] == ']' {
		c.i++
		c.buf = append(c.buf, ']')
		return nil
	}
	for {
		if err := c.value(); err != nil {
			return err
		}
		c.skipSpace()
		if c.raw[c.i] == ']' {
			c.i++
			c.buf = append(c.buf, ']')
			return nil
		}
		c.i++ // ','
		c.buf = append(c.buf, ',')
	}
}

func (c *canonicalizer) object() error {
	base, first := len(c.buf), len(c.members)
	defer func() { c.members = c.members[:first] }()
	c.skipSpace()
	for c.raw[c.i] != '}' {
		c.skipSpace()
		start := c.i
		var escaped bool
		c.i, escaped = stringEnd(c.raw, c.i)
		quoted := c.raw[start:c.i]
		escaped = escaped || !utf8.Valid(quoted)
		key := quoted[1 : len(quoted)-1]
		if escaped {
			var k string
			if err := json.Unmarshal(quoted, &k); err != nil {
				return err
			}
			key = []byte(k)
		}
		m := member{key: key, start: len(c.buf)}
		if err := c.appendString(quoted, escaped); err != nil {
			return err
		}
		c.buf = append(c.buf, ':')
		c.skipSpace()
		c.i++ // ':'
		if err := c.value(); err != nil {
			return err
		}
		m.end = len(c.buf)
		c.members = append(c.members, m)
		c.skipSpace()
		if c.raw[c.i] == ',' {
			c.i++
			c.skipSpace()
		}
	}
	c.i++ // '}'
	// Sorted by key; of duplicate keys the last one counts, as in a decode
	// into a map.
	ms := c.members[first:]
	slices.SortStableFunc(ms, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	sorted := len(c.buf)
	c.buf = append(c.buf, '{')
	written := 0
	for i, m := range ms {
		if i+1 < len(ms) && bytes.Equal(ms[i+1].key, m.key) {
			continue
		}
		if written > 0 {
			c.buf = append(c.buf, ',')
		}
		c.buf = append(c.buf, c.buf[m.start:m.end]...)
		written++
	}
	c.buf = append(c.buf, '}')
	n := copy(c.buf[base:], c.buf[sorted:])
	c.buf = c.buf[:base+n]
	return nil
}

func (c *canonicalizer) appendString(quoted []byte, escaped bool) error {
	var err error
	c.buf, err = appendCanonicalString(c.buf, quoted, escaped)
	return err
}

// appendCanonicalString appends the quoted JSON string quoted in
// encoding/json's escaping: as is when it is already in that form, else
// decoded and encoded again.
func appendCanonicalString(dst, quoted []byte, escaped bool) ([]byte, error) {
	inner := quoted[1 : len(quoted)-1]
	if !escaped && marshalsVerbatim(inner) {
		return append(dst, quoted...), nil
	}
	var s string
	if err := json.Unmarshal(quoted, &s); err != nil {
		return dst, err
	}
	return appendJSONString(dst, s), nil
}

// appendJSONString appends s as json.Marshal writes it.
func appendJSONString(dst []byte, s string) []byte {
	if marshalsVerbatim([]byte(s)) {
		dst = append(dst, '"')
		dst = append(dst, s...)
		return append(dst, '"')
	}
	b, _ := json.Marshal(s) // a string always marshals
	return append(dst, b...)
}

// marshalsVerbatim reports whether json.Marshal writes the string b
// between quotes unchanged: valid UTF-8 with no quote, backslash, control
// character, <, >, &, U+2028 or U+2029.
func marshalsVerbatim(b []byte) bool {
	for i := 0; i < len(b); {
		c := b[i]
		if c < utf8.RuneSelf {
			if c < 0x20 || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
				return false
			}
			i++
			continue
		}
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			return false
		}
		i += size
	}
	return true
}
