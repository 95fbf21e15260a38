package framework

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// checkJSON is the one check of a request body, in one pass over its
// bytes, before anything decodes it. It rejects what a decoder would
// silently accept or choke on, and what a database cannot store: invalid
// UTF-8, an unpaired surrogate escape ("\ud800", which a decoder turns
// into U+FFFD, so that "c\ud800" and "c\ufffd" would bind alike; RFC 7493
// forbids it), duplicate object keys (compared after unescaping), nesting
// deeper than maxDepth, a syntax error and anything but exactly one JSON
// value are malformed_json; a string holding NUL (which PostgreSQL text
// cannot store) and a number longer than [MaxNumberLength] are
// validation_failed on their field ("items[0].sku"). It returns an *Error.
//
// Of several faults it reports the first in the document's order, and
// invalid UTF-8 anywhere before any other, as a walk through
// encoding/json's tokens does; its syntax errors are worded as
// encoding/json words them. That walk is its reference in the tests
// (TestCheckJSONAgreesWithTheTokenWalk, FuzzFastPathsAgree).
func checkJSON(body []byte, maxDepth int) error {
	c := checker{body: body, maxDepth: maxDepth}
	err := c.document()
	if err == nil {
		return nil
	}
	if !utf8.Valid(body) {
		return Errorf(wire.CodeMalformedJSON, "body is not valid UTF-8")
	}
	if pe, ok := err.(*pathError); ok {
		return fieldError(pe.path(), pe.reason)
	}
	return err
}

// checker is one run of checkJSON.
type checker struct {
	body     []byte
	i        int
	maxDepth int
	// keys are the keys of the open objects, each object's after the
	// previous one's: small objects need no map. The first ones are kept
	// in the checker itself, the rest in more.
	keys  [16]keyRef
	more  []keyRef
	nkeys int
	// unescaped holds the keys spelled with an escape, unescaped.
	unescaped [][]byte
}

// keyRef is one key: body[start:end], or unescaped[-start-1] for a key
// spelled with an escape. It holds no pointer, so that a checker can stay
// on the stack.
type keyRef struct{ start, end int }

func (c *checker) keyBytes(r keyRef) []byte {
	if r.start < 0 {
		return c.unescaped[-r.start-1]
	}
	return c.body[r.start:r.end]
}

func (c *checker) keyAt(i int) keyRef {
	if i < len(c.keys) {
		return c.keys[i]
	}
	return c.more[i-len(c.keys)]
}

func (c *checker) addKey(r keyRef) {
	if c.nkeys < len(c.keys) {
		c.keys[c.nkeys] = r
	} else {
		c.more = append(c.more[:c.nkeys-len(c.keys)], r)
	}
	c.nkeys++
}

// pathError is a fault that names its field: each container the value is
// in adds its member or index on the way out.
type pathError struct {
	reason string
	// segs are innermost first.
	segs []pathSeg
}

// pathSeg is an object's member (key) or an array's element (index).
type pathSeg struct {
	key    string
	index  int
	member bool
}

func (e *pathError) Error() string { return e.path() + ": " + e.reason }

// path names the field in the style of validation failures:
// "items[0].sku"; the top level is "body". A NUL in a key is spelled
// \u0000.
func (e *pathError) path() string {
	var b strings.Builder
	for i := len(e.segs) - 1; i >= 0; i-- {
		s := e.segs[i]
		if !s.member {
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strings.ReplaceAll(s.key, "\x00", `\u0000`))
	}
	if b.Len() == 0 {
		return "body"
	}
	return b.String()
}

// within adds the place of a container's value to err when it names a
// field.
func within(err error, seg pathSeg) error {
	if pe, ok := err.(*pathError); ok {
		pe.segs = append(pe.segs, seg)
	}
	return err
}

const (
	nulReason = "must not contain NUL characters"
	// unpairedSurrogateDetail is checkJSON's answer to a string that
	// spells half a UTF-16 surrogate pair.
	unpairedSurrogateDetail = `a string holds an unpaired UTF-16 surrogate escape such as \ud800, which is not text (RFC 7493)`
)

var numberReason = fmt.Sprintf("a number of at most %d characters", MaxNumberLength)

func (c *checker) document() error {
	c.skipSpace()
	if c.i == len(c.body) {
		return Errorf(wire.CodeMalformedJSON, "body is empty")
	}
	if err := c.value(0); err != nil {
		return err
	}
	c.skipSpace()
	if c.i == len(c.body) {
		return nil
	}
	// Something follows: a second value, unless its first token is
	// not one.
	switch ch := c.body[c.i]; ch {
	case '{', '[':
	case '}', ']', ',', ':':
		return c.syntax(ch, " looking for beginning of value")
	case '"':
		if _, _, err := c.string(); err != nil {
			return err
		}
	default:
		if _, err := c.scalar(); err != nil {
			return err
		}
	}
	return Errorf(wire.CodeMalformedJSON, "body holds more than one JSON value")
}

// value checks the value at c.i (no whitespace before it) at nesting depth
// (the number of open containers).
func (c *checker) value(depth int) error {
	if c.i == len(c.body) {
		return c.eof()
	}
	switch ch := c.body[c.i]; ch {
	case '{', '[':
		if depth >= c.maxDepth {
			return Errorf(wire.CodeMalformedJSON, "JSON nesting is deeper than %d", c.maxDepth)
		}
		c.i++
		if ch == '{' {
			base := c.nkeys
			err := c.members(base, depth+1)
			c.nkeys = base
			return err
		}
		return c.elements(depth + 1)
	case '}', ']', ',', ':':
		return c.syntax(ch, " looking for beginning of value")
	case '"':
		start := c.i
		nul, escaped, err := c.string()
		switch {
		case err != nil:
			return err
		case escaped && unpairedSurrogate(c.body[start:c.i]):
			return Errorf(wire.CodeMalformedJSON, unpairedSurrogateDetail)
		case nul:
			return &pathError{reason: nulReason}
		}
		return nil
	}
	start := c.i
	number, err := c.scalar()
	if err != nil {
		return err
	}
	if number && c.i-start > MaxNumberLength {
		return &pathError{reason: numberReason}
	}
	return nil
}

// members checks an object's members, from after its '{'; its keys are
// the checker's keys from base on.
func (c *checker) members(base, depth int) error {
	c.skipSpace()
	if c.i == len(c.body) {
		return c.eof()
	}
	switch ch := c.body[c.i]; ch {
	case '}':
		c.i++
		return nil
	case '"':
	default:
		return c.syntax(ch, "")
	}
	for {
		start := c.i
		nul, escaped, err := c.string()
		if err != nil {
			return err
		}
		ref := keyRef{start + 1, c.i - 1}
		if escaped {
			if unpairedSurrogate(c.body[start:c.i]) {
				return Errorf(wire.CodeMalformedJSON, unpairedSurrogateDetail)
			}
			// A copy: nothing of body is kept past the check.
			var k string
			_ = json.Unmarshal(bytes.Clone(c.body[start:c.i]), &k)
			c.unescaped = append(c.unescaped, []byte(k))
			ref = keyRef{start: -len(c.unescaped)}
		}
		key := c.keyBytes(ref)
		for i := base; i < c.nkeys; i++ {
			if bytes.Equal(c.keyBytes(c.keyAt(i)), key) {
				return Errorf(wire.CodeMalformedJSON, "duplicate object key %q", string(key))
			}
		}
		c.addKey(ref)
		if nul {
			return &pathError{reason: nulReason, segs: []pathSeg{{key: string(key), member: true}}}
		}
		c.skipSpace()
		if c.i == len(c.body) {
			return c.eof()
		}
		if ch := c.body[c.i]; ch != ':' {
			return c.syntax(ch, " after object key")
		}
		c.i++
		c.skipSpace()
		if err := c.value(depth); err != nil {
			return within(err, pathSeg{key: string(key), member: true})
		}
		if done, err := c.next('}', " after object key:value pair"); done || err != nil {
			return err
		}
		if c.i == len(c.body) {
			return c.eof()
		}
		if ch := c.body[c.i]; ch != '"' {
			return c.syntax(ch, " looking for beginning of object key string")
		}
	}
}

// elements checks an array's elements, from after its '['.
func (c *checker) elements(depth int) error {
	c.skipSpace()
	if c.i < len(c.body) && c.body[c.i] == ']' {
		c.i++
		return nil
	}
	for index := 0; ; index++ {
		if err := c.value(depth); err != nil {
			return within(err, pathSeg{index: index})
		}
		if done, err := c.next(']', " after array element"); done || err != nil {
			return err
		}
	}
}

// next reads what follows a container's member or element: its end (done)
// or a comma and the whitespace after it; anything else is a syntax error
// in context.
func (c *checker) next(end byte, context string) (done bool, err error) {
	c.skipSpace()
	if c.i == len(c.body) {
		return false, c.eof()
	}
	switch ch := c.body[c.i]; ch {
	case end:
		c.i++
		return true, nil
	case ',':
		c.i++
		c.skipSpace()
		return false, nil
	default:
		return false, c.syntax(ch, context)
	}
}

// plainString marks the bytes a string holds as they are: printable
// ASCII but the quote and the backslash.
var plainString = func() (t [256]bool) {
	for b := 0x20; b < utf8.RuneSelf; b++ {
		t[b] = b != '"' && b != '\\'
	}
	return t
}()

// string checks the string that starts at c.i (its opening quote) and
// moves past it. It reports whether it spells NUL (\u0000, the only way
// valid JSON can) and whether it holds an escape.
func (c *checker) string() (nul, escaped bool, err error) {
	b := c.body
	i := c.i + 1
	for {
		for i < len(b) && plainString[b[i]] {
			i++
		}
		if i == len(b) {
			return nul, escaped, c.eof()
		}
		switch ch := b[i]; {
		case ch == '"':
			c.i = i + 1
			return nul, escaped, nil
		case ch == '\\':
			escaped = true
			if i+1 == len(b) {
				return nul, escaped, c.eof()
			}
			switch e := b[i+1]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				for k := i + 2; k < i+6; k++ {
					if k == len(b) {
						return nul, escaped, c.eof()
					}
					if !isHex(b[k]) {
						return nul, escaped, c.syntax(b[k], ` in \u hexadecimal character escape`)
					}
				}
				nul = nul || string(b[i+2:i+6]) == "0000"
				i += 6
			default:
				return nul, escaped, c.syntax(e, " in string escape code")
			}
		case ch < 0x20:
			return nul, escaped, c.syntax(ch, " in string literal")
		default:
			r, size := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && size == 1 {
				return nul, escaped, Errorf(wire.CodeMalformedJSON, "body is not valid UTF-8")
			}
			i += size
		}
	}
}

func isHex(b byte) bool {
	return '0' <= b && b <= '9' || 'a' <= b && b <= 'f' || 'A' <= b && b <= 'F'
}

func isDigit(b byte) bool { return '0' <= b && b <= '9' }

// scalar checks the number or literal at c.i and moves past it.
func (c *checker) scalar() (number bool, err error) {
	switch ch := c.body[c.i]; {
	case ch == 't':
		return false, c.literal("true")
	case ch == 'f':
		return false, c.literal("false")
	case ch == 'n':
		return false, c.literal("null")
	case ch == '-' || isDigit(ch):
		return true, c.number()
	default:
		return false, c.syntax(ch, " looking for beginning of value")
	}
}

func (c *checker) literal(word string) error {
	for k := 1; k < len(word); k++ {
		if c.i+k == len(c.body) {
			return c.eof()
		}
		if ch := c.body[c.i+k]; ch != word[k] {
			return c.syntax(ch, " in literal "+word+" (expecting '"+word[k:k+1]+"')")
		}
	}
	c.i += len(word)
	return nil
}

// number moves past the number at c.i: it ends where its grammar does,
// whatever follows.
func (c *checker) number() error {
	b, i := c.body, c.i
	if b[i] == '-' {
		i++
		if i == len(b) {
			return c.eof()
		}
		if !isDigit(b[i]) {
			return c.syntax(b[i], " in numeric literal")
		}
	}
	if b[i] == '0' {
		i++
	} else {
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && b[i] == '.' {
		i++
		if i == len(b) {
			return c.eof()
		}
		if !isDigit(b[i]) {
			return c.syntax(b[i], " after decimal point in numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i == len(b) {
			return c.eof()
		}
		if !isDigit(b[i]) {
			return c.syntax(b[i], " in exponent of numeric literal")
		}
		for i < len(b) && isDigit(b[i]) {
			i++
		}
	}
	c.i = i
	return nil
}

func (c *checker) skipSpace() { c.i = skipSpace(c.body, c.i) }

// skipSpace returns the position of the first byte from b[i] on that is
// not JSON whitespace.
func skipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// syntax is a syntax error at the byte ch, worded as encoding/json words
// it: context is empty or starts with a space.
func (c *checker) syntax(ch byte, context string) error {
	return &Error{Code: wire.CodeMalformedJSON, Detail: "body is not valid JSON: invalid character " + quoteChar(ch) + context}
}

// eof is the error of a body that ends inside a value.
func (c *checker) eof() error {
	return &Error{Code: wire.CodeMalformedJSON, Detail: "body is not valid JSON: unexpected EOF"}
}

// quoteChar quotes a byte as encoding/json's errors do.
func quoteChar(c byte) string {
	switch c {
	case '\'':
		return `'\''`
	case '"':
		return `'"'`
	}
	s := strconv.Quote(string(rune(c)))
	return "'" + s[1:len(s)-1] + "'"
}

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

func fieldError(field, reason string) *Error {
	return &Error{Code: wire.CodeValidationFailed, Detail: "the command has invalid fields",
		Fields: []wire.FieldError{{Field: field, Reason: reason}}}
}
