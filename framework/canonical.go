package framework

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// The canonical form of a command, which its fingerprint hashes: object
// keys sorted by their UTF-8 bytes, no insignificant whitespace, strings
// in encoding/json's escaping, and every number in one spelling (4200,
// 4200.0 and 4.2e3 all become 42e2). Two commands that mean the same give
// the same bytes. It is written in one pass over the command as
// json.Marshal wrote it; the tests compare it with a decode into
// map[string]any written back in that form (the reference).

// appendCanonical appends the canonical form of the valid JSON document
// raw to dst.
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

func (c *canonicalizer) skipSpace() { c.i = skipSpace(c.raw, c.i) }

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
