package framework

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// jsonCorpus is hand-picked JSON, valid and not, for the check and the
// canonical form.
var jsonCorpus = []string{
	`{"a":1,"a":2}`, `{"a":1,"\u0061":2}`, `{"x":[{"k":1,"k":1}]}`, "{\"a\":\"\xc3\x28\"}",
	strings.Repeat("[", 33) + strings.Repeat("]", 33), strings.Repeat("[", 32) + strings.Repeat("]", 32),
	strings.Repeat(`{"a":`, 33) + "1" + strings.Repeat("}", 33), strings.Repeat(`{"a":`, 32) + "1" + strings.Repeat("}", 32),
	`{} {}`, ``, ` `, `{"a":}`, `{"a":1,}`, `[1,]`, `[`, `"x"`, `1`, ` -0.50e+3 `, `true`, `null`, `[]`, `{}`, `[{}, [], ""]`,
	`{"a":{"a":1},"b":{"a":2}}`, `[1,"a","a"]`, `{"b":[1,{"y":2,"x":"é"}],"a":4.2e3, "c":null}`,
	`{"k\"q":1,"k\\q":2,"k\"q":3}`, `{"<&>":"<&>","\u2028":"\u2029 ` + "\u2028" + `"}`, `{"é":1,"\u00e9":2}`,
	`{"a":"\ud800"}`, `{"a":"\udc00x"}`, `{"a":"\ud800\u0041"}`, `{"\ud800":1,"\ud800":2}`, `{"a":"\\ud800"}`, `["x","\uDBFF"]`,
	`{"a":"\ude00\ud83d"}`, `{"\ud83d\ude00":"😀"}`, `{"ctl":"\u0001\t\n\\\/"}`, "{\"raw\":\"\x7f\"}",
	`{"z":1,"y":2,"x":3,"w":4,"v":5,"u":6,"t":7,"s":8,"r":9,"q":10,"p":11,"o":12,"n":13,"m":14,"l":15,"k":16,"j":17,"z":18}`,
	`{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.00"}],"note":""}`,
	"{\"a\"\t:\n[ 1 ,\r2 ] }", `{"n":1e400}`, `{"n":0.000}`, `[1E+2,1e-2,-0,100]`,
	`{"quantity":[2,2.0,2e0,0.2e1,200e-2,2.00E+0,-0.0,18446744073709551615,1.8446744073709551615e19]}`,
	// NUL and long numbers, named by their field, and what comes first.
	`{"a":"x\u0000"}`, `{"a\u0000":1}`, `[{"k":["\u0000"]}]`, `{"a":1,"a\u0000":2}`, `{"a\u0000":1,"a\u0000":2}`,
	`{"a":"\u0000\ud800"}`, `"\u0000"`, `{"a":"\\u0000"}`, "{\"a\":\"\\u0000\"\xff}",
	`{"n":[1,` + strings.Repeat("7", 70) + `]}`, strings.Repeat("7", 70) + `x`, `[` + strings.Repeat("7", 70),
	`{"n":` + strings.Repeat("7", 64) + `}`, `{"n":-0.` + strings.Repeat("7", 70) + `e5}`, `[1,` + strings.Repeat("7", 70) + `"x"]`,
	// Syntax errors, as encoding/json words them.
	"[é]", "[\x01]", `{'a':1}`, `[tru]`, `[nul]`, `[fals`, `-`, `1.`, `1e`, `1e+`, `[1.e5]`, `[-x]`, `"\u12G4"`, "\"a\tb\"",
	`{1:2}`, `{"a" 1}`, `{"a"::1}`, `{"a":1,}`, `{,}`, `[,1]`, `{"a":1 "b"}`, `{"a":1}}`, `{} "x`, `{} "x"`, `{} 12`, `{} tru`,
	`{} ]`, `[1}`, `{"a":1]`, `[1:2]`, `{"a",1}`, `[01]`, `01`, `1 2`, ` [ ] `, "\t\r\n",
	// More keys than the check keeps in place, nested, escaped, with and
	// without a duplicate past the 16th.
	manyKeys(20, manyKeys(20, "1", ""), ""), manyKeys(20, manyKeys(18, "1", `"k17"`), ""), manyKeys(18, "[]", `"k\u0030"`),
}

// manyKeys writes an object of n members k0… whose last value is last,
// with a member named dup (a JSON string) after them when dup is set.
func manyKeys(n int, last, dup string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		fmt.Fprintf(&b, `"k%d":`, i)
		if i == n-1 {
			b.WriteString(last)
		} else {
			b.WriteString("0")
		}
		b.WriteByte(',')
	}
	if dup != "" {
		b.WriteString(dup + `:1,`)
	}
	return strings.TrimSuffix(b.String(), ",") + "}"
}

// randomJSON writes a random document with the features the check and the
// canonical form treat specially: escapes (unpaired surrogates too), non-ASCII, HTML characters, number spellings,
// duplicate keys, whitespace and nesting.
func randomJSON(rng *rand.Rand, depth int) string {
	ws := func() string { return []string{"", "", " ", "\n\t"}[rng.IntN(4)] }
	str := func() string {
		parts := []string{"a", "b", "k", "é", `\u00e9`, `\"`, `\\`, "<", "&", `\u2028`, "\u2028", `\n`, `\/`, "😀", `\ud83d\ude00`, "\x7f", `\ud800`, `\udc00`, `\\u`, `\u0000`}
		var sb strings.Builder
		sb.WriteByte('"')
		for range rng.IntN(4) {
			sb.WriteString(parts[rng.IntN(len(parts))])
		}
		sb.WriteByte('"')
		return sb.String()
	}
	if depth > 3 {
		return []string{"1", "-0.50", "4.2e3", "4200", `"x"`, "true", "null"}[rng.IntN(7)]
	}
	switch rng.IntN(7) {
	case 0:
		n := rng.IntN(5)
		var parts []string
		for range n {
			parts = append(parts, ws()+str()+ws()+":"+ws()+randomJSON(rng, depth+1)+ws())
		}
		return "{" + strings.Join(parts, ",") + "}"
	case 1:
		n := rng.IntN(4)
		var parts []string
		for range n {
			parts = append(parts, ws()+randomJSON(rng, depth+1)+ws())
		}
		return "[" + strings.Join(parts, ",") + "]"
	case 2:
		return str()
	case 3:
		return []string{"0", "-0.0", "1.50", "15e-1", "1E+2", "123456789012345678901234567890", "1e-7",
			strings.Repeat("9", MaxNumberLength+1)}[rng.IntN(8)]
	default:
		return []string{"true", "false", "null"}[rng.IntN(3)]
	}
}

func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	var ea, eb *Error
	if !errors.As(a, &ea) || !errors.As(b, &eb) {
		return a.Error() == b.Error()
	}
	return ea.Code == eb.Code && ea.Detail == eb.Detail && slices.Equal(ea.Fields, eb.Fields)
}

func corpus(n int) []string {
	docs := append([]string(nil), jsonCorpus...)
	rng := rand.New(rand.NewPCG(1, 2))
	for range n {
		docs = append(docs, randomJSON(rng, 0))
	}
	return docs
}

// TestCheckJSONAgreesWithTheTokenWalk: the one check gives the answer of
// the walk through encoding/json's tokens (code, detail and field) on
// every document of the corpus, valid or not, and on each of them cut
// short at every byte.
func TestCheckJSONAgreesWithTheTokenWalk(t *testing.T) {
	t.Parallel()
	docs := corpus(3000)
	for _, doc := range jsonCorpus {
		for i := range doc {
			docs = append(docs, doc[:i])
		}
	}
	for _, doc := range docs {
		for _, depth := range []int{2, DefaultMaxDepth} {
			fast, ref := checkJSON([]byte(doc), depth), checkJSONTokens([]byte(doc), depth)
			if !sameError(fast, ref) {
				t.Fatalf("checkJSON(%q, %d) = %#v, the token walk says %#v", doc, depth, fast, ref)
			}
		}
	}
}

// TestCanonicalJSONFastPathAgrees: the canonical form written in one pass
// is the decoded reference's, byte for byte.
func TestCanonicalJSONFastPathAgrees(t *testing.T) {
	t.Parallel()
	for _, doc := range corpus(3000) {
		agreeCanonical(t, []byte(doc))
	}
}

// agreeCanonical compares the one-pass canonical form of raw with the
// decoded reference's. Of duplicate keys the reference keeps the last and
// never reads the others, while the one pass refuses an overlong number
// in any of them; production canonicalizes what json.Marshal wrote, which
// has no duplicate keys, so there only the forms of documents both write
// are compared.
func agreeCanonical(t *testing.T, raw []byte) {
	t.Helper()
	fast, ferr := canonicalJSON(raw)
	ref, rerr := canonicalJSONDecoded(raw)
	if ferr != nil && rerr == nil && json.Valid(raw) && !jsontext.Value(raw).IsValid(jsontext.AllowInvalidUTF8(true)) {
		return
	}
	if (ferr == nil) != (rerr == nil) || !bytes.Equal(fast, ref) {
		t.Fatalf("canonicalJSON(%q) = %s, %v; the decoded path gives %s, %v", raw, fast, ferr, ref, rerr)
	}
}

// referenceFingerprint is computeFingerprint as it was first written: the
// stored fingerprints of existing records were made by it.
func referenceFingerprint(in fingerprintInput) (string, error) {
	raw, err := json.Marshal(in.Command)
	if err != nil {
		return "", err
	}
	if len(in.Volatile) > 0 {
		if raw, err = dropPaths(raw, in.Volatile); err != nil {
			return "", err
		}
	}
	command, err := canonicalJSONDecoded(raw)
	if err != nil {
		return "", err
	}
	envelope, err := json.Marshal(struct {
		Version   int               `json:"v"`
		Tenant    string            `json:"tenant"`
		Operation string            `json:"op"`
		Path      map[string]string `json:"path,omitempty"`
		Headers   map[string]string `json:"headers,omitempty"`
		Command   json.RawMessage   `json:"command"`
	}{FingerprintVersion, in.Tenant, in.Operation, in.PathParams, in.Headers, command})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(envelope)
	return fmt.Sprintf("v%d:%x", FingerprintVersion, sum), nil
}

func TestFingerprintMatchesReference(t *testing.T) {
	t.Parallel()
	type item struct {
		SKU       string  `json:"sku"`
		Quantity  int     `json:"quantity"`
		UnitPrice string  `json:"unit_price"`
		Weight    float64 `json:"weight"`
	}
	type order struct {
		Customer string            `json:"customer"`
		Items    []item            `json:"items"`
		Note     string            `json:"note,omitempty"`
		Meta     map[string]any    `json:"meta"`
		Tags     map[string]string `json:"tags,omitempty"`
		Amount   Integer           `json:"amount"`
	}
	rng := rand.New(rand.NewPCG(3, 4))
	names := []string{"", "acme", "<&>", "é", "\u2028", `q"b\s`, "tab\t", "\xff"}
	pick := func() string { return names[rng.IntN(len(names))] }
	for i := range 3000 {
		var cmd any
		switch i % 3 {
		case 0:
			var doc any
			if err := json.Unmarshal([]byte(randomJSON(rng, 0)), &doc); err != nil {
				t.Fatal(err)
			}
			cmd = doc
		case 1:
			cmd = order{Customer: pick(), Note: pick(), Items: []item{{SKU: pick(), Quantity: rng.IntN(5), UnitPrice: "10.00", Weight: rng.Float64()}},
				Meta: map[string]any{pick(): pick(), "n": rng.IntN(1000)}, Tags: map[string]string{pick(): pick()}, Amount: Integer(rng.IntN(99))}
		default:
			cmd = map[string]any{"amount": rng.IntN(10000), "currency": pick(), "meta": map[string]any{"trace": pick()}}
		}
		in := fingerprintInput{Tenant: pick(), Operation: pick(), Command: cmd}
		if rng.IntN(2) == 0 {
			in.PathParams = map[string]string{"id": pick(), pick(): pick()}
		}
		if rng.IntN(2) == 0 {
			in.Headers = map[string]string{"Api-Version": pick()}
		}
		if rng.IntN(4) == 0 {
			in.Volatile = []string{"meta.trace", "note"}
		}
		got, gerr := computeFingerprint(in)
		want, werr := referenceFingerprint(in)
		if (gerr == nil) != (werr == nil) || got != want {
			t.Fatalf("computeFingerprint(%+v) = %s, %v; the reference gives %s, %v", in, got, gerr, want, werr)
		}
	}
}

// FuzzFastPathsAgree compares the one check and the canonical form with
// their references (reference_test.go) on any input.
func FuzzFastPathsAgree(f *testing.F) {
	for _, doc := range jsonCorpus {
		f.Add([]byte(doc), 4)
	}
	f.Fuzz(func(t *testing.T, raw []byte, depth int) {
		depth = 1 + (depth&0xff)%40
		if fast, ref := checkJSON(raw, depth), checkJSONTokens(raw, depth); !sameError(fast, ref) {
			t.Fatalf("checkJSON(%q, %d) = %#v, the token walk says %#v", raw, depth, fast, ref)
		}
		agreeCanonical(t, raw)
	})
}

func BenchmarkCheckJSON(b *testing.B) {
	body := []byte(`{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.00"},` +
		`{"sku":"sku_2","quantity":1,"unit_price":"5.50"}],"note":"bench"}`)
	for _, path := range []struct {
		name  string
		check func([]byte, int) error
	}{{"scan", checkJSON}, {"tokens", checkJSONTokens}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := path.check(body, DefaultMaxDepth); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkCanonicalJSON(b *testing.B) {
	raw := []byte(`{"customer":"cus_1","currency":"EUR","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.00"},` +
		`{"sku":"sku_2","quantity":1,"unit_price":"5.50"}],"note":"bench","n":` + strconv.Itoa(4200) + `}`)
	for _, path := range []struct {
		name  string
		canon func([]byte) ([]byte, error)
	}{{"scan", func(raw []byte) ([]byte, error) { return appendCanonical(nil, raw) }}, {"decoded", canonicalJSONDecoded}} {
		b.Run(path.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := path.canon(raw); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
