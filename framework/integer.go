package framework

import (
	"bytes"
	"encoding"
	"encoding/json"
	"errors"
	"math"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Integer is an int64 command field. [Bind] binds every integer field of
// a command alike, whatever its Go type (int, int8 … uint64, a type of the
// application's own, behind pointers, in slices, maps and nested
// structs); Integer does the same under encoding/json too: any JSON
// spelling of an integer (500, 500.0, 5e2, 5.00E+2) is one value. It is
// always written as a plain integer.
type Integer int64

// UnmarshalJSON implements [json.Unmarshaler]. A fraction, a string, a
// value outside int64 or a spelling longer than [MaxNumberLength] is a type
// error (validation_failed on the field).
func (a *Integer) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	// encoding/json has checked that b is one JSON value: a number starts
	// with a minus or a digit.
	if len(b) > 0 && (b[0] == '-' || b[0] >= '0' && b[0] <= '9') {
		if n, ok := parseInteger(b, 64); ok {
			*a = Integer(n)
			return nil
		}
	}
	return &json.UnmarshalTypeError{Value: "number " + string(b), Type: reflect.TypeFor[int64]()}
}

// integerDigits spells the JSON number num as a plain decimal integer
// ("-42" for -42, -42.0, -4.2e1 and -4200e-2) and reports false for a
// fraction and for a number whose integer has more digits than any Go
// integer holds. A number longer than [MaxNumberLength] is refused before
// anything parses it, so its cost is bounded whatever it spells.
func integerDigits(num []byte) (string, bool) {
	if len(num) == 0 || len(num) > MaxNumberLength {
		return "", false
	}
	if !bytes.ContainsAny(num, ".eE") {
		if string(num) == "-0" {
			return "0", true
		}
		return string(num), true
	}
	canon, err := canonicalNumber(string(num))
	if err != nil {
		return "", false
	}
	digits, exp, ok := strings.Cut(canon, "e")
	if !ok {
		return digits, true
	}
	e, err := strconv.Atoi(exp)
	// The canonical form has no trailing zero: a negative exponent is a
	// fraction. 20 digits hold every uint64.
	if err != nil || e < 0 || len(strings.TrimPrefix(digits, "-"))+e > 20 {
		return "", false
	}
	return digits + strings.Repeat("0", e), true
}

// parseInteger reads the JSON number num as a signed integer of the given
// bits, whichever way it is spelled.
func parseInteger(num []byte, bits int) (int64, bool) {
	digits, ok := integerDigits(num)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(digits, 10, bits)
	return n, err == nil
}

// parseUnsigned is [parseInteger] for an unsigned integer.
func parseUnsigned(num []byte, bits int) (uint64, bool) {
	digits, ok := integerDigits(num)
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseUint(digits, 10, bits)
	return n, err == nil
}

var (
	integerType       = reflect.TypeFor[Integer]()
	ownUnmarshalTypes = []reflect.Type{reflect.TypeFor[json.Unmarshaler](), reflect.TypeFor[jsonv2.Unmarshaler](),
		reflect.TypeFor[jsonv2.UnmarshalerFrom](), reflect.TypeFor[encoding.TextUnmarshaler]()}
)

// integerUnmarshalers make [Bind] bind a JSON number into every integer
// field of a command, of any integer kind, the way [Integer] does: one
// value for every spelling of one integer, so that a retry that spells a
// number differently has the same command and fingerprint. A fraction or
// a value the field's type cannot hold is an [*integerError]. A type with
// an unmarshaler of its own (other than Integer) and anything but a
// number (null, a string for a `json:",string"` field) are left to the
// decoder.
func integerUnmarshalers() *jsonv2.Unmarshalers {
	return jsonv2.UnmarshalFromFunc(func(dec *jsontext.Decoder, v any) error {
		rv := reflect.ValueOf(v).Elem()
		kind := rv.Kind()
		if kind < reflect.Int || kind > reflect.Uint64 || dec.PeekKind() != '0' {
			return errors.ErrUnsupported
		}
		t := rv.Type()
		if t != integerType {
			for _, u := range ownUnmarshalTypes {
				if reflect.PointerTo(t).Implements(u) {
					return errors.ErrUnsupported
				}
			}
		}
		num, err := dec.ReadValue()
		if err != nil {
			return err
		}
		if kind <= reflect.Int64 {
			n, ok := parseInteger(num, t.Bits())
			if !ok {
				return &integerError{t: t}
			}
			rv.SetInt(n)
			return nil
		}
		n, ok := parseUnsigned(num, t.Bits())
		if !ok {
			return &integerError{t: t}
		}
		rv.SetUint(n)
		return nil
	})
}

// integerError is the error of an integer field given a fraction or a
// number out of its type's range; its text is the field's reason.
type integerError struct{ t reflect.Type }

func (e *integerError) Error() string {
	bits := e.t.Bits()
	if e.t.Kind() >= reflect.Uint {
		return "must be an integer from 0 to " + strconv.FormatUint(math.MaxUint64>>(64-bits), 10)
	}
	return "must be an integer from " + strconv.FormatInt(math.MinInt64>>(64-bits), 10) + " to " +
		strconv.FormatInt(math.MaxInt64>>(64-bits), 10)
}
