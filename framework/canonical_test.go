package framework

import (
	"bytes"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"strings"
	"testing"
)

func TestCanonicalNumber(t *testing.T) {
	t.Parallel()
	groups := [][]string{
		{"4200", "4200.0", "4.2e3", "4.2E+3", "42e2", "0.42e4", "4200.000"},
		{"0", "-0", "0.0", "0e10", "-0.0e-3"},
		{"-1.5", "-15e-1", "-1.50", "-0.15E1"},
		{"0.001", "1e-3", "0.0010"},
	}
	for _, g := range groups {
		want, err := canonicalNumber(g[0])
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range g[1:] {
			got, err := canonicalNumber(s)
			if err != nil || got != want {
				t.Fatalf("canonicalNumber(%q) = %q, %v; want %q (as %q)", s, got, err, want, g[0])
			}
		}
	}
	distinct := []string{"1", "10", "0.1", "-1", "11", "1.1"}
	seen := map[string]string{}
	for _, s := range distinct {
		got, _ := canonicalNumber(s)
		if prev, dup := seen[got]; dup {
			t.Fatalf("%q and %q both canonicalize to %q", prev, s, got)
		}
		seen[got] = s
	}
}

func TestCanonicalJSONOrderAndSpacing(t *testing.T) {
	t.Parallel()
	a := []byte(`{"b":[1,{"y":2,"x":"é"}],"a":4.2e3, "c":null}`)
	b := []byte("{\n  \"c\": null, \"a\": 4200, \"b\": [1.0, {\"x\": \"\\u00e9\", \"y\": 2}]\n}")
	ca, err := canonicalJSON(a)
	if err != nil {
		t.Fatal(err)
	}
	cb, err := canonicalJSON(b)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(ca, cb) {
		t.Fatalf("canonical forms differ:\n%s\n%s", ca, cb)
	}
	if want := `{"a":42e2,"b":[1,{"x":"é","y":2}],"c":null}`; string(ca) != want {
		t.Fatalf("canonical = %s, want %s", ca, want)
	}
}

func TestCheckJSONRejects(t *testing.T) {
	t.Parallel()
	cases := map[string]string{
		"duplicate key":         `{"a":1,"a":2}`,
		"escaped duplicate key": `{"a":1,"\u0061":2}`,
		"nested duplicate":      `{"x":[{"k":1,"k":1}]}`,
		"invalid UTF-8":         "{\"a\":\"\xc3\x28\"}",
		"too deep":              strings.Repeat("[", 33) + strings.Repeat("]", 33),
		"trailing value":        `{} {}`,
		"empty":                 ``,
		"syntax":                `{"a":}`,
	}
	for name, body := range cases {
		err := checkJSON([]byte(body), DefaultMaxDepth)
		if !errors.Is(err, ErrMalformedJSON) {
			t.Fatalf("%s: checkJSON(%q) = %v, want malformed_json", name, body, err)
		}
	}
	for _, ok := range []string{`{"a":{"a":1},"b":{"a":2}}`, `[1,"a","a"]`, strings.Repeat("[", 32) + strings.Repeat("]", 32), `"x"`} {
		if err := checkJSON([]byte(ok), DefaultMaxDepth); err != nil {
			t.Fatalf("checkJSON(%q) = %v, want nil", ok, err)
		}
	}
}

// FuzzCanonicalJSON checks that canonicalization never panics, is
// idempotent, and gives one form for documents that differ only in key
// order, whitespace and number spelling.
func FuzzCanonicalJSON(f *testing.F) {
	for _, s := range []string{`{"amount":4200,"currency":"usd"}`, `[1,2.5e3,-0.0,"x",null,true]`, `{"a":{"b":[{}]}}`, `1e400`, `"\u00e9"`} {
		f.Add([]byte(s), uint64(1))
	}
	f.Fuzz(func(t *testing.T, raw []byte, seed uint64) {
		if checkJSON(raw, DefaultMaxDepth) != nil {
			return
		}
		canon, err := canonicalJSON(raw)
		if err != nil {
			return // e.g. an exponent beyond int range
		}
		again, err := canonicalJSON(canon)
		if err != nil && strings.Contains(err.Error(), "a number longer than") {
			// The bound is on a number's spelling in a request: a spelling
			// within it ("111…1.13", 63 characters) can have a canonical
			// form past it ("111…113e-2", 65), which a second pass then
			// refuses. Production hashes the canonical form and never
			// canonicalizes it again.
			return
		}
		if err != nil || !bytes.Equal(canon, again) {
			t.Fatalf("not idempotent: %s → %s (%v)", canon, again, err)
		}
		respelled, err := respell(raw, rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)))
		if err != nil || checkJSON(respelled, DefaultMaxDepth) != nil {
			return // a respelling past the bounds (a number over MaxNumberLength) is refused, not equal
		}
		other, err := canonicalJSON(respelled)
		if err != nil || !bytes.Equal(canon, other) {
			t.Fatalf("equal documents canonicalize differently:\n%s → %s\n%s → %s (%v)", raw, canon, respelled, other, err)
		}
	})
}

// respell rewrites a JSON document with the same meaning: objects in a
// random key order, extra whitespace, numbers with a trailing ".0" or
// rewritten with an exponent.
func respell(raw []byte, rng *rand.Rand) ([]byte, error) {
	v, err := decodeNumbers(raw)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	var write func(v any) error
	write = func(v any) error {
		buf.WriteString(" ")
		switch t := v.(type) {
		case map[string]any:
			keys := make([]string, 0, len(t))
			for k := range t {
				keys = append(keys, k)
			}
			rng.Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
			buf.WriteString("{")
			for i, k := range keys {
				if i > 0 {
					buf.WriteString(" ,")
				}
				kb, _ := json.Marshal(k)
				buf.Write(kb)
				buf.WriteString(" : ")
				if err := write(t[k]); err != nil {
					return err
				}
			}
			buf.WriteString("}")
		case []any:
			buf.WriteString("[")
			for i, e := range t {
				if i > 0 {
					buf.WriteString(",\n")
				}
				if err := write(e); err != nil {
					return err
				}
			}
			buf.WriteString("]")
		case json.Number:
			s := string(t)
			switch {
			case !strings.ContainsAny(s, ".eE") && rng.IntN(2) == 0:
				s += ".0"
			case !strings.ContainsAny(s, "eE"):
				s += "e0"
			}
			buf.WriteString(s)
		default:
			b, err := json.Marshal(t)
			if err != nil {
				return err
			}
			buf.Write(b)
		}
		return nil
	}
	err = write(v)
	return buf.Bytes(), err
}

func TestFingerprintScope(t *testing.T) {
	t.Parallel()
	cmd := map[string]any{"amount": 4200, "currency": "usd"}
	base := fingerprintInput{Tenant: "acme", Operation: "payments.create", Command: cmd}
	fp := func(in fingerprintInput) string {
		f, err := computeFingerprint(in)
		if err != nil {
			t.Fatal(err)
		}
		return f
	}
	want := fp(base)
	if !strings.HasPrefix(want, "v1:") || len(want) != 3+64 {
		t.Fatalf("fingerprint form = %q", want)
	}
	same := base
	same.Command = map[string]any{"currency": "usd", "amount": 4200.0}
	if fp(same) != want {
		t.Fatalf("equal commands have different fingerprints")
	}
	for name, in := range map[string]fingerprintInput{
		"tenant":    {Tenant: "globex", Operation: base.Operation, Command: cmd},
		"operation": {Tenant: "acme", Operation: "refunds.create", Command: cmd},
		"path":      {Tenant: "acme", Operation: base.Operation, Command: cmd, PathParams: map[string]string{"id": "1"}},
		"header":    {Tenant: "acme", Operation: base.Operation, Command: cmd, Headers: map[string]string{"Api-Version": "2"}},
		"command":   {Tenant: "acme", Operation: base.Operation, Command: map[string]any{"amount": 4201, "currency": "usd"}},
	} {
		if fp(in) == want {
			t.Fatalf("a different %s gives the same fingerprint", name)
		}
	}
	volatile := base
	volatile.Command = map[string]any{"amount": 4200, "currency": "usd", "meta": map[string]any{"trace": "abc"}}
	volatile.Volatile = []string{"meta.trace"}
	withMeta := fp(volatile)
	volatile.Command = map[string]any{"amount": 4200, "currency": "usd", "meta": map[string]any{"trace": "xyz"}}
	if fp(volatile) != withMeta {
		t.Fatalf("a volatile field changed the fingerprint")
	}
}

func BenchmarkFingerprint(b *testing.B) {
	type item struct {
		SKU       string `json:"sku"`
		Quantity  int    `json:"quantity"`
		UnitPrice string `json:"unit_price"`
	}
	cmd := struct {
		Customer string `json:"customer"`
		Currency string `json:"currency"`
		Items    []item `json:"items"`
	}{"cus_1", "EUR", []item{{"sku_1", 2, "10.00"}, {"sku_2", 1, "5.50"}}}
	in := fingerprintInput{Tenant: "acme", Operation: "orders", PathParams: map[string]string{"id": "0b9e7c1e-8a3f-4c2e-9d7a-2f1b3c4d5e6f"}, Command: cmd}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := computeFingerprint(in); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkBindOrder(b *testing.B) {
	type item struct {
		SKU       string `json:"sku" validate:"required"`
		Quantity  int    `json:"quantity" validate:"min=1"`
		UnitPrice string `json:"unit_price" validate:"required"`
	}
	type command struct {
		Customer string `json:"customer" validate:"required,max=64"`
		Currency string `json:"currency" validate:"required,iso4217"`
		Items    []item `json:"items" validate:"required,min=1,dive"`
	}
	binder, err := NewBinder(BinderConfig{})
	if err != nil {
		b.Fatal(err)
	}
	body := []byte(`{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.00"}]}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Bind[command](binder, body); err != nil {
			b.Fatal(err)
		}
	}
}

func TestCanonicalNumberExponentBounds(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"1e9223372036854775807", "10e9223372036854775807", "0.1e-9223372036854775808", "1e99999999999999999999"} {
		if got, err := canonicalNumber(s); err == nil && strings.HasPrefix(got, "1e-") {
			t.Fatalf("canonicalNumber(%q) = %q: the exponent wrapped around", s, got)
		}
	}
	if got, err := canonicalNumber("1e9223372036854775807"); err != nil || got != "1e9223372036854775807" {
		t.Fatalf("largest exponent: %q, %v", got, err)
	}
}

func TestSemanticHeaders(t *testing.T) {
	t.Parallel()
	h := http.Header{}
	h.Set("api-version", "2026-01-01")
	h.Set("Authorization", "Bearer secret")
	got := semanticHeaders(h, []string{"API-Version", "X-Tenant-Region"})
	if len(got) != 1 || got["Api-Version"] != "2026-01-01" {
		t.Fatalf("semanticHeaders = %v", got)
	}
	if semanticHeaders(h, []string{"X-None"}) != nil {
		t.Fatal("no declared header present should give nil")
	}
}

// TestCanonicalJSONRefusesLongNumbers: a number longer than
// MaxNumberLength is refused even when it is already in canonical form
// (an integer without trailing zeros), alone or inside a document, as the
// decoded path refuses it; 64 digits still pass.
func TestCanonicalJSONRefusesLongNumbers(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("4", MaxNumberLength+1)
	for _, doc := range []string{long, `{"n":` + long + `}`, `[1,` + long + `]`} {
		if got, err := canonicalJSON([]byte(doc)); err == nil {
			t.Errorf("canonicalJSON(%.20s…) = %.20s…, want an error", doc, got)
		}
	}
	ok := strings.Repeat("4", MaxNumberLength)
	if got, err := canonicalJSON([]byte(ok)); err != nil || string(got) != ok {
		t.Errorf("CanonicalJSON of %d digits = %s, %v", MaxNumberLength, got, err)
	}
}
