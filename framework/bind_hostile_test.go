package framework

import (
	"encoding/json"
	"errors"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/retrysafe/retrysafe/wire"
)

type hostileItem struct {
	SKU      string  `json:"sku" validate:"required,max=64"`
	Quantity Integer `json:"quantity" validate:"min=1"`
	Packs    uint8   `json:"packs,omitempty"`
}

type hostileCommand struct {
	Customer string            `json:"customer" validate:"required,max=64"`
	Amount   Integer           `json:"amount"`
	Items    []hostileItem     `json:"items"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// setupBinder returns a Binder with the default bounds.
func setupBinder(t testing.TB) *Binder {
	t.Helper()
	b, err := NewBinder(BinderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestBindRejectsTextTheDatabaseCannotStore: NUL in any string of any
// command, at any depth, in a value or a key, is validation_failed naming
// the field, on every command without the command declaring anything.
func TestBindRejectsTextTheDatabaseCannotStore(t *testing.T) {
	t.Parallel()
	b := setupBinder(t)
	for body, field := range map[string]string{
		`{"customer":"cus_\u0000"}`:                                 "customer",
		`{"customer":"c","items":[{"sku":"a"},{"sku":"b\u0000c"}]}`: "items[1].sku",
		`{"customer":"c","labels":{"k":"\u0000"}}`:                  "labels.k",
		`{"customer":"c","labels":{"k\u0000":"v"}}`:                 `labels.k\u0000`,
	} {
		_, err := Bind[hostileCommand](b, []byte(body))
		e, ok := AsError(err)
		if !ok || e.Code != wire.CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0].Field != field {
			t.Fatalf("Bind(%s) = %#v, want validation_failed on %s", body, err, field)
		}
	}
	// Invalid UTF-8 never gets as far as the command.
	for _, body := range []string{"{\"customer\":\"cus_\xff\"}", "{\"customer\":\"\xc3\x28\"}"} {
		if _, err := Bind[hostileCommand](b, []byte(body)); !errors.Is(err, ErrMalformedJSON) {
			t.Fatalf("Bind(%q) = %v, want malformed_json", body, err)
		}
	}
	// Text the database can store is fine, escaped or not.
	if _, err := Bind[hostileCommand](b, []byte(`{"customer":"caf\u00e9 \ud83d\ude00 \u0001"}`)); err != nil {
		t.Fatalf("storable text rejected: %v", err)
	}
}

// TestBindRejectsHugeNumbers: a number longer than MaxNumberLength is
// validation_failed on its field, wherever it is and whatever the target
// type (Integer, an int64, a float, an ignored field).
func TestBindRejectsHugeNumbers(t *testing.T) {
	t.Parallel()
	b := setupBinder(t)
	huge := strings.Repeat("9", 100_000)
	for body, field := range map[string]string{
		`{"customer":"c","amount":` + huge + `}`:                           "amount",
		`{"customer":"c","amount":1` + strings.Repeat("0", 70) + `e-70}`:   "amount",
		`{"customer":"c","items":[{"sku":"a","quantity":0.` + huge + `}]}`: "items[0].quantity",
	} {
		_, err := Bind[hostileCommand](b, []byte(body))
		e, ok := AsError(err)
		if !ok || e.Code != wire.CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0].Field != field {
			t.Fatalf("Bind(%.80s…) = %v, want validation_failed on %s", body, err, field)
		}
	}
	// Integer refuses a long spelling by itself too, outside Bind.
	var n Integer
	if err := json.Unmarshal([]byte(huge), &n); err == nil {
		t.Fatal("Integer accepted a 100,000-digit number")
	}
	if _, err := canonicalNumber(huge); err == nil {
		t.Fatal("canonicalNumber accepted a 100,000-digit number")
	}
	// The bound leaves room for every integer and decimal spelling in use.
	if _, err := Bind[hostileCommand](b, []byte(`{"customer":"c","amount":9.223372036854775807e18}`)); err != nil {
		t.Fatalf("a long but sane spelling was rejected: %v", err)
	}
}

// BenchmarkBindMillionDigitNumber shows that a 1,000,000-digit number is
// rejected for the price of scanning it once (milliseconds), not the
// seconds that parsing it with arbitrary precision costs.
func BenchmarkBindMillionDigitNumber(b *testing.B) {
	binder := setupBinder(b)
	body := []byte(`{"customer":"c","amount":` + strings.Repeat("7", 1_000_000) + `}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Bind[hostileCommand](binder, body); !errors.Is(err, ErrValidationFailed) {
			b.Fatalf("Bind = %v, want validation_failed", err)
		}
	}
}

// TestBindNamesMembersExactly: a member binds only to the field whose JSON
// name it is, byte for byte. One that differs in case or by a Unicode case
// fold (ſ U+017F for s, K U+212A for k), alone or beside the real field,
// at any depth, is validation_failed naming it with its path; encoding/json
// would have bound it, so that {"amount":100,"Amount":1} meant 1.
func TestBindNamesMembersExactly(t *testing.T) {
	t.Parallel()
	b := setupBinder(t)
	for body, field := range map[string]string{
		`{"customer":"c","amount":100,"Amount":1}`:                          "Amount",
		`{"customer":"c","AMOUNT":1}`:                                       "AMOUNT",
		`{"Customer":"c"}`:                                                  "Customer",
		`{"customer":"alice","cuſtomer":"mallory"}`:                         "cuſtomer",
		`{"customer":"alice","cu\u017ftomer":"mallory"}`:                    "cuſtomer",
		`{"customer":"c","\u0041mount":1}`:                                  "Amount",
		`{"customer":"c","items":[{"sku":"a","quantity":1,"QUANTITY":9}]}`:  "items[0].QUANTITY",
		`{"customer":"c","items":[{"sku":"a"},{"sku":"b","s\u212au":"x"}]}`: "items[1].s\u212au",
		`{"customer":"c","items":[{"sku":"a","Quantity":9}]}`:               "items[0].Quantity",
	} {
		cmd, err := Bind[hostileCommand](b, []byte(body))
		e, ok := AsError(err)
		if !ok || e.Code != wire.CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0].Field != field || e.Fields[0].Reason != "unknown field" {
			t.Fatalf("Bind(%s) = %+v, %#v; want validation_failed, unknown field %s", body, cmd, err, field)
		}
	}
	// Map keys are data, not field names: they keep their case.
	cmd, err := Bind[hostileCommand](b, []byte(`{"customer":"c","labels":{"k":"a","K":"b","\u212a":"c"}}`))
	if err != nil || len(cmd.Labels) != 3 || cmd.Labels["K"] != "b" {
		t.Fatalf("labels bound as %v, %v", cmd.Labels, err)
	}
}

// TestBindNamesTypeErrorsByPath: a value of the wrong type is
// validation_failed on its path, an index as [i] and a member name that is
// digits as .name.
func TestBindNamesTypeErrorsByPath(t *testing.T) {
	t.Parallel()
	b := setupBinder(t)
	for body, want := range map[string]wire.FieldError{
		`{"customer":5}`:                                        {Field: "customer", Reason: "must be a string"},
		`{"customer":"c","amount":"9"}`:                         {Field: "amount", Reason: "must be a int64"},
		`{"customer":"c","amount":1.5}`:                         {Field: "amount", Reason: "must be an integer from -9223372036854775808 to 9223372036854775807"},
		`{"customer":"c","items":[{"sku":"a","quantity":"9"}]}`: {Field: "items[0].quantity", Reason: "must be a int64"},
		`{"customer":"c","items":{"0":{"sku":"a"}}}`:            {Field: "items", Reason: "must be a []framework.hostileItem"},
		`{"customer":"c","labels":{"0":5}}`:                     {Field: "labels.0", Reason: "must be a string"},
		`["customer"]`:                                          {Field: "body", Reason: "must be a framework.hostileCommand"},
	} {
		_, err := Bind[hostileCommand](b, []byte(body))
		e, ok := AsError(err)
		if !ok || e.Code != wire.CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0] != want {
			t.Fatalf("Bind(%s) = %#v, want validation_failed %+v", body, err, want)
		}
	}
}

// TestBindRefusesUnpairedSurrogates: an escape that spells half a UTF-16
// surrogate pair is malformed_json (RFC 7493), in a value or a key, at any
// depth; encoding/json would store it as U+FFFD, so that "c\ud800" and
// "c\ufffd" replayed each other. A pair, and the text \ud800 behind an
// escaped backslash, bind.
func TestBindRefusesUnpairedSurrogates(t *testing.T) {
	t.Parallel()
	b := setupBinder(t)
	for _, body := range []string{
		`{"customer":"c\ud800"}`, `{"customer":"\udc00c"}`, `{"customer":"\ud800\u0041"}`, `{"customer":"\ud800\ud800"}`,
		`{"customer":"\udc00\ud800"}`, `{"customer":"\ude00\ud83d"}`, `{"customer":"\uD800"}`, `{"customer":"\\\ud800"}`,
		`{"customer":"c","items":[{"sku":"\udfff"}]}`, `{"customer":"c","labels":{"k\ud800":"v"}}`, `{"c\udbff":1}`,
	} {
		if _, err := Bind[hostileCommand](b, []byte(body)); !errors.Is(err, ErrMalformedJSON) {
			t.Fatalf("Bind(%s) = %v, want malformed_json", body, err)
		}
		if fast, ref := checkJSON([]byte(body), DefaultMaxDepth), checkJSONTokens([]byte(body), DefaultMaxDepth); !sameError(fast, ref) {
			t.Fatalf("checkJSON(%s) = %v, the token walk says %v", body, fast, ref)
		}
	}
	for body, want := range map[string]string{
		`{"customer":"\ud83d\ude00"}`: "😀",
		`{"customer":"\uD83D\uDE00"}`: "😀",
		`{"customer":"\\ud800"}`:      `\ud800`,
		`{"customer":"\ufffd"}`:       "\ufffd",
	} {
		cmd, err := Bind[hostileCommand](b, []byte(body))
		if err != nil || cmd.Customer != want {
			t.Fatalf("Bind(%s) = %q, %v; want %q", body, cmd.Customer, err, want)
		}
	}
}

// TestBindRefusesBodiesCutShort: a body that ends inside an object or an
// array is malformed_json, from the check, whatever the command's type:
// the walk the check replaced took the end of its input there for the end
// of the document, so that "[1," bound into a struct was a type error and
// Binder.CheckJSON (a PATCH document, an operator's resolution) passed it.
func TestBindRefusesBodiesCutShort(t *testing.T) {
	t.Parallel()
	b := setupBinder(t)
	full := `{"customer":"c","items":[{"sku":"a","quantity":2}],"labels":{"k":"v"}}`
	for i := 1; i < len(full); i++ {
		body := []byte(full[:i])
		if _, err := Bind[hostileCommand](b, body); !errors.Is(err, ErrMalformedJSON) {
			t.Fatalf("Bind(%s) = %v, want malformed_json", body, err)
		}
		if err := b.CheckJSON(body); !errors.Is(err, ErrMalformedJSON) {
			t.Fatalf("CheckJSON(%s) = %v, want malformed_json", body, err)
		}
	}
	for _, body := range []string{`[`, `[1,`, `[{}`, `{"a":[1]`} {
		if _, err := Bind[hostileCommand](b, []byte(body)); !errors.Is(err, ErrMalformedJSON) {
			t.Fatalf("Bind(%s) = %v, want malformed_json", body, err)
		}
	}
}

// FuzzBind checks Bind against references that share none of its code:
// a body it binds is valid I-JSON to jsontext (UTF-8, no duplicate names,
// no unpaired surrogate), and every member name in it is exactly one of
// the command's JSON names; binding the command's own JSON gives it back,
// and so does binding the body respelled (members in another order, its
// numbers as 2.0 or 2e0), with the same fingerprint.
func FuzzBind(f *testing.F) {
	for _, body := range []string{
		`{"customer":"c","amount":100,"Amount":1}`,
		`{"customer":"alice","cuſtomer":"mallory"}`,
		`{"customer":"c","items":[{"sku":"a","quantity":1,"QUANTITY":9}]}`,
		`{"customer":"c","items":[{"s\u212au":"a"}]}`,
		`{"customer":"c\ud800"}`, `{"customer":"\\ud800"}`, `{"customer":"\ud83d\ude00","labels":{"K":"v","k":"w"}}`,
		`{"customer":"c","amount":4.2e3,"items":[{"sku":"a","quantity":2}]}`, `{"customer":"c","\u0061mount":1}`,
		`{"customer":"c","amount":0.42e4,"items":[{"sku":"a","quantity":2.0,"packs":2e0},{"sku":"b","quantity":200e-2,"packs":0.2e1}]}`,
		`{"customer":"c","items":[{"sku":"a","quantity":1,"packs":256}]}`, `{"customer":"c","items":[{"sku":"a","quantity":1,"packs":-0.0}]}`,
		`{"customer":"c","amount":-9.223372036854775808e18}`, `{"customer":"c","amount":1.5e0}`,
	} {
		f.Add([]byte(body))
	}
	b := setupBinder(f)
	commandNames := []string{"amount", "customer", "items", "labels"}
	itemNames := []string{"packs", "quantity", "sku"}
	f.Fuzz(func(t *testing.T, body []byte) {
		cmd, err := Bind[hostileCommand](b, body)
		if err != nil {
			if _, ok := AsError(err); !ok {
				t.Fatalf("Bind(%q) = %v, not an *Error", body, err)
			}
			return
		}
		if !jsontext.Value(body).IsValid() {
			t.Fatalf("Bind(%q) accepted a body that is not I-JSON", body)
		}
		var members map[string]json.RawMessage
		if err := json.Unmarshal(body, &members); err != nil {
			t.Fatalf("Bind(%q) accepted a body that is not an object: %v", body, err)
		}
		var items []map[string]json.RawMessage
		if raw, ok := members["items"]; ok {
			_ = json.Unmarshal(raw, &items)
		}
		for name := range members {
			if !slices.Contains(commandNames, name) {
				t.Fatalf("Bind(%q) = %+v accepted the member %q", body, cmd, name)
			}
		}
		for _, item := range items {
			for name := range item {
				if !slices.Contains(itemNames, name) {
					t.Fatalf("Bind(%q) = %+v accepted the item member %q", body, cmd, name)
				}
			}
		}
		own, err := json.Marshal(cmd)
		if err != nil {
			t.Fatal(err)
		}
		again, err := Bind[hostileCommand](b, own)
		if err != nil || !sameHostileCommand(again, cmd) {
			t.Fatalf("Bind(%q) = %+v; its JSON %s binds to %+v, %v", body, cmd, own, again, err)
		}
		respelled, err := respell(body, rand.New(rand.NewPCG(uint64(len(body)), 7)))
		if err != nil || checkJSON(respelled, DefaultMaxDepth) != nil {
			return // a respelling past MaxNumberLength is refused, not equal
		}
		again, err = Bind[hostileCommand](b, respelled)
		if err != nil || !sameHostileCommand(again, cmd) {
			t.Fatalf("Bind(%q) = %+v; respelled as %s it binds to %+v, %v", body, cmd, respelled, again, err)
		}
		fp := func(c hostileCommand) string {
			f, err := computeFingerprint(fingerprintInput{Tenant: "t", Operation: "op", Command: c})
			if err != nil {
				t.Fatal(err)
			}
			return f
		}
		if fp(again) != fp(cmd) {
			t.Fatalf("Bind(%q) and Bind(%q) have different fingerprints", body, respelled)
		}
	})
}

func sameHostileCommand(a, b hostileCommand) bool {
	return slices.Equal(a.Items, b.Items) && a.Customer == b.Customer && a.Amount == b.Amount && maps.Equal(a.Labels, b.Labels)
}

// BenchmarkBindCommand binds a command with an [Integer], nested items and
// a map: the custom unmarshaler and every kind of member lookup.
func BenchmarkBindCommand(b *testing.B) {
	binder := setupBinder(b)
	body := []byte(`{"customer":"cus_1","amount":4200,"items":[{"sku":"sku_1","quantity":2},{"sku":"sku_2","quantity":1.0}],"labels":{"order":"1042"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Bind[hostileCommand](binder, body); err != nil {
			b.Fatal(err)
		}
	}
}
