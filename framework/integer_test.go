package framework

import (
	"encoding/json"
	"testing"
)

func TestIntegerAcceptsEveryIntegerSpelling(t *testing.T) {
	for in, want := range map[string]int64{
		"500": 500, "500.0": 500, "5e2": 500, "5E+2": 500, "0.5e3": 500, "50000e-2": 500,
		"-7": -7, "99999999": 99999999, "0": 0,
	} {
		var a Integer
		if err := json.Unmarshal([]byte(in), &a); err != nil || int64(a) != want {
			t.Errorf("%s: %d, %v; want %d", in, a, err, want)
		}
	}
	for _, in := range []string{`"500"`, "500.5", "5e-1", "1e31", "1e999999999", "9223372036854775808", "true", "[]"} {
		var a Integer
		if err := json.Unmarshal([]byte(in), &a); err == nil {
			t.Errorf("%s: accepted as %d", in, a)
		}
	}
	var cmd struct{ Amount Integer }
	err := json.Unmarshal([]byte(`{"Amount":1.5}`), &cmd)
	if te, ok := err.(*json.UnmarshalTypeError); !ok || te.Field != "Amount" {
		t.Fatalf("error %#v, want a type error naming the field", err)
	}
	if b, _ := json.Marshal(Integer(500)); string(b) != "500" {
		t.Fatalf("marshal %s", b)
	}
}
