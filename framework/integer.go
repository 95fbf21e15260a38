package framework

import (
	"encoding/json"
	"math/big"
	"reflect"
	"strconv"
	"strings"
)

// maxExponent bounds the exponent of an integer's spelling, so that 1e999999
// cannot make the parser build a huge number.
const maxExponent = 30

// Integer is an int64 command field that accepts any JSON spelling of an
// integer (500, 500.0, 5e2, 5.00E+2), so that requests that mean the same
// bind to the same command and have the same fingerprint: amounts in minor
// units, counts. It is always written as a plain integer.
type Integer int64

// UnmarshalJSON implements [json.Unmarshaler]. A fraction, a string, a
// value outside int64 or a spelling longer than [MaxNumberLength] is a type
// error (validation_failed on the field).
func (a *Integer) UnmarshalJSON(b []byte) error {
	s := string(b)
	if s == "null" {
		return nil
	}
	n, ok := integral(s)
	if !ok {
		return &json.UnmarshalTypeError{Value: "number " + s, Type: reflect.TypeFor[int64]()}
	}
	*a = Integer(n)
	return nil
}

func integral(s string) (int64, bool) {
	// Bound the spelling before big.Rat parses it: its cost grows faster
	// than the number of digits.
	if s == "" || len(s) > MaxNumberLength || !(s[0] == '-' || s[0] >= '0' && s[0] <= '9') {
		return 0, false
	}
	if _, exp, ok := strings.Cut(strings.ToLower(s), "e"); ok {
		e, err := strconv.Atoi(exp)
		if err != nil || e > maxExponent || e < -maxExponent {
			return 0, false
		}
	}
	r, ok := new(big.Rat).SetString(s)
	if !ok || !r.IsInt() || !r.Num().IsInt64() {
		return 0, false
	}
	return r.Num().Int64(), true
}
