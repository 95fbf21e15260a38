package retrysafetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// member is one member of a JSON object, its value as written.
type member struct {
	name  string
	value json.RawMessage
}

// members reads the members of a JSON object in order, duplicates kept.
func members(body []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var value json.RawMessage
		if err := dec.Decode(&value); err != nil {
			return nil, err
		}
		out = append(out, member{name: tok.(string), value: value})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("more than one JSON value")
	}
	if len(out) == 0 {
		return nil, errors.New("an empty object has no member names to spell otherwise")
	}
	return out, nil
}

// object writes members as a JSON object.
func object(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		name, _ := json.Marshal(m.name)
		b.Write(name)
		b.WriteByte(':')
		b.Write(m.value)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// spelling is a body whose member name is spelled another way.
type spelling struct {
	what string
	body []byte
	fold bool // a Unicode case fold (U+017F, U+212A)
}

// spellings are body's member names spelled otherwise, one at a time: in
// another case, instead of the right name and beside it; with U+017F
// (ſ) for an s and U+212A (K, the Kelvin sign) for a k, which Go's
// encoding/json folds onto s and k; and twice. A name beside or twice
// carries the member's value in other where other has a different one
// ({"amount":100,"Amount":1}): the spelling a reader that matches names
// loosely would take.
func spellings(body, other []byte) []spelling {
	ms, err := members(body)
	if err != nil {
		return nil
	}
	others := map[string]json.RawMessage{}
	if oms, err := members(other); err == nil {
		for _, m := range oms {
			others[m.name] = m.value
		}
	}
	var out []spelling
	with := func(i int, insert bool, m member) []byte {
		ms2 := append([]member(nil), ms[:i+1]...)
		if insert {
			ms2 = append(ms2, m)
		} else {
			ms2[i] = m
		}
		return object(append(ms2, ms[i+1:]...))
	}
	for i, m := range ms {
		second := m.value
		if v, ok := others[m.name]; ok && !bytes.Equal(v, m.value) {
			second = v
		}
		if swapped := swapCase(m.name); swapped != m.name {
			out = append(out,
				spelling{what: fmt.Sprintf("%q for %q", swapped, m.name), body: with(i, false, member{swapped, m.value})},
				spelling{what: fmt.Sprintf("%q beside %q", swapped, m.name), body: with(i, true, member{swapped, second})})
		}
		for _, fold := range []struct{ letters, by string }{{"sS", "\u017f"}, {"kK", "\u212a"}} {
			if at := strings.IndexAny(m.name, fold.letters); at >= 0 {
				folded := m.name[:at] + fold.by + m.name[at+1:]
				out = append(out,
					spelling{what: fmt.Sprintf("%q (%U) for %q", folded, []rune(fold.by)[0], m.name), body: with(i, false, member{folded, m.value}), fold: true},
					spelling{what: fmt.Sprintf("%q (%U) beside %q", folded, []rune(fold.by)[0], m.name), body: with(i, true, member{folded, second}), fold: true})
			}
		}
		out = append(out, spelling{what: fmt.Sprintf("%q twice", m.name), body: with(i, true, member{m.name, second})})
	}
	return out
}

// swapCase swaps the case of the first letter of name that has another.
func swapCase(name string) string {
	for at, r := range name {
		switch {
		case unicode.IsLower(r) && unicode.ToUpper(r) != r:
			return name[:at] + string(unicode.ToUpper(r)) + name[at+len(string(r)):]
		case unicode.IsUpper(r) && unicode.ToLower(r) != r:
			return name[:at] + string(unicode.ToLower(r)) + name[at+len(string(r)):]
		}
	}
	return name
}
