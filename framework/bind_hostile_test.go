package framework

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type hostileItem struct {
	SKU      string  `json:"sku" validate:"required,max=64"`
	Quantity Integer `json:"quantity" validate:"min=1"`
}

type hostileCommand struct {
	Customer string            `json:"customer" validate:"required,max=64"`
	Amount   Integer           `json:"amount"`
	Items    []hostileItem     `json:"items"`
	Labels   map[string]string `json:"labels,omitempty"`
}

// TestBindRejectsTextTheDatabaseCannotStore: NUL in any string of any
// command, at any depth, in a value or a key, is validation_failed naming
// the field, on every command without the command declaring anything.
func TestBindRejectsTextTheDatabaseCannotStore(t *testing.T) {
	t.Parallel()
	b, err := NewBinder(BinderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	for body, field := range map[string]string{
		`{"customer":"cus_\u0000"}`:                                 "customer",
		`{"customer":"c","items":[{"sku":"a"},{"sku":"b\u0000c"}]}`: "items[1].sku",
		`{"customer":"c","labels":{"k":"\u0000"}}`:                  "labels.k",
		`{"customer":"c","labels":{"k\u0000":"v"}}`:                 `labels.k\u0000`,
	} {
		_, err := Bind[hostileCommand](b, []byte(body))
		e, ok := AsError(err)
		if !ok || e.Code != CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0].Field != field {
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
	b, err := NewBinder(BinderConfig{})
	if err != nil {
		t.Fatal(err)
	}
	huge := strings.Repeat("9", 100_000)
	for body, field := range map[string]string{
		`{"customer":"c","amount":` + huge + `}`:                           "amount",
		`{"customer":"c","amount":1` + strings.Repeat("0", 70) + `e-70}`:   "amount",
		`{"customer":"c","items":[{"sku":"a","quantity":0.` + huge + `}]}`: "items[0].quantity",
	} {
		_, err := Bind[hostileCommand](b, []byte(body))
		e, ok := AsError(err)
		if !ok || e.Code != CodeValidationFailed || len(e.Fields) != 1 || e.Fields[0].Field != field {
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
	binder, err := NewBinder(BinderConfig{})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"customer":"c","amount":` + strings.Repeat("7", 1_000_000) + `}`)
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Bind[hostileCommand](binder, body); !errors.Is(err, ErrValidationFailed) {
			b.Fatalf("Bind = %v, want validation_failed", err)
		}
	}
}
