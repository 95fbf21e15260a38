package framework

import (
	"reflect"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/wire"
)

// count is a named integer type of the application's own.
type count uint16

type intsLine struct {
	Qty   int    `json:"qty" validate:"min=1"`
	Packs []uint `json:"packs,omitempty"`
}

// intsCommand has an integer field of every kind a command may declare:
// plain ints and sized ones, unsigned ones, a named type, pointers, and
// integers in nested structs, slices and maps.
type intsCommand struct {
	N      int              `json:"n"`
	Small  int8             `json:"small"`
	Port   uint16           `json:"port"`
	Big    int64            `json:"big"`
	Huge   uint64           `json:"huge"`
	Opt    *int32           `json:"opt,omitempty"`
	Count  count            `json:"count"`
	Amount Integer          `json:"amount"`
	Lines  []intsLine       `json:"lines,omitempty"`
	Stock  map[string]int64 `json:"stock,omitempty"`
	Ratio  float64          `json:"ratio"`
}

// TestBindIntegerFieldsTakeEverySpelling: every integer field of any
// command, whatever its Go kind and wherever it is, binds every JSON
// spelling of one integer (2, 2.0, 2e0, 0.2e1, 200e-2) to one value, so
// that the commands are equal and so are their fingerprints (DESIGN §4).
func TestBindIntegerFieldsTakeEverySpelling(t *testing.T) {
	t.Parallel()
	b := setupBinder(t)
	body := func(two, big string) string {
		return `{"n":` + two + `,"small":-` + two + `,"port":` + two + `,"big":` + big + `,"huge":` + two + `,"opt":` + two +
			`,"count":` + two + `,"amount":` + two + `,"lines":[{"qty":` + two + `,"packs":[` + two + `,1]}],"stock":{"a":` + two + `},"ratio":0.5}`
	}
	var first *intsCommand
	var firstFP string
	for _, sp := range []struct{ two, big string }{
		{"2", "9223372036854775807"}, {"2.0", "9223372036854775807.000"}, {"2e0", "9.223372036854775807e18"},
		{"0.2e1", "92233720368547758070e-1"}, {"200e-2", "9223372036854775807E0"}, {"2.00E+0", "9223372036854775807"},
	} {
		cmd, err := Bind[intsCommand](b, []byte(body(sp.two, sp.big)))
		if err != nil {
			t.Fatalf("Bind with %s: %v", sp.two, err)
		}
		if cmd.N != 2 || cmd.Small != -2 || cmd.Port != 2 || cmd.Big != 1<<63-1 || cmd.Huge != 2 || cmd.Opt == nil || *cmd.Opt != 2 ||
			cmd.Count != 2 || cmd.Amount != 2 || cmd.Lines[0].Qty != 2 || cmd.Lines[0].Packs[0] != 2 || cmd.Stock["a"] != 2 {
			t.Fatalf("Bind with %s = %+v", sp.two, cmd)
		}
		fp, err := computeFingerprint(fingerprintInput{Tenant: "t", Operation: "op", Command: cmd})
		if err != nil {
			t.Fatal(err)
		}
		if first == nil {
			first, firstFP = &cmd, fp
			continue
		}
		if !reflect.DeepEqual(*first, cmd) || fp != firstFP {
			t.Fatalf("spelling %s binds to %+v (%s), 2 to %+v (%s)", sp.two, cmd, fp, *first, firstFP)
		}
	}

	// A fraction, a value the field's Go type cannot hold, and a string are
	// validation_failed on the field; a float field keeps its fraction.
	for _, tc := range []struct{ body, field, reason string }{
		{`{"n":2.5}`, "n", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"n":25e-1}`, "n", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"small":128}`, "small", "must be an integer from -128 to 127"},
		{`{"small":-1.29e2}`, "small", "must be an integer from -128 to 127"},
		{`{"port":65536}`, "port", "must be an integer from 0 to 65535"},
		{`{"port":-1}`, "port", "must be an integer from 0 to 65535"},
		{`{"huge":1.8446744073709551616e19}`, "huge", "must be an integer from 0 to 18446744073709551615"},
		{`{"big":1e30}`, "big", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"opt":2147483648}`, "opt", "must be an integer from -2147483648 to 2147483647"},
		{`{"count":7e4}`, "count", "must be an integer from 0 to 65535"},
		{`{"amount":0.5}`, "amount", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"lines":[{"qty":1},{"qty":1.5}]}`, "lines[1].qty", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"lines":[{"qty":1,"packs":[1,-1]}]}`, "lines[0].packs[1]", "must be an integer from 0 to 18446744073709551615"},
		{`{"stock":{"a":1e-1}}`, "stock.a", "must be an integer from -9223372036854775808 to 9223372036854775807"},
		{`{"n":"2"}`, "n", "must be a int"},
	} {
		_, err := Bind[intsCommand](b, []byte(tc.body))
		e, ok := AsError(err)
		if !ok || e.Code != wire.CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0] != (wire.FieldError{Field: tc.field, Reason: tc.reason}) {
			t.Fatalf("Bind(%s) = %#v, want validation_failed on %s: %s", tc.body, err, tc.field, tc.reason)
		}
	}
	cmd, err := Bind[intsCommand](b, []byte(`{"ratio":2.5e-1,"n":null}`))
	if err != nil || cmd.Ratio != 0.25 || cmd.N != 0 {
		t.Fatalf("float and null: %+v, %v", cmd, err)
	}
	// A number longer than MaxNumberLength never reaches the parser.
	if _, err := Bind[intsCommand](b, []byte(`{"n":1`+strings.Repeat("0", MaxNumberLength)+`e-64}`)); !isFieldError(err, "n") {
		t.Fatalf("an overlong spelling of 1: %v", err)
	}
}

func isFieldError(err error, field string) bool {
	e, ok := AsError(err)
	return ok && e.Code == wire.CodeValidationFailed && len(e.Fields) == 1 && e.Fields[0].Field == field
}
