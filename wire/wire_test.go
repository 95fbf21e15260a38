package wire_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/wire"
)

func TestParseKey(t *testing.T) {
	t.Parallel()
	h := func(kv ...string) http.Header {
		out := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			out.Add(kv[i], kv[i+1])
		}
		return out
	}
	valid := []struct {
		header http.Header
		want   string
	}{
		{h("Idempotency-Key", "abc-123_x.y:z"), "abc-123_x.y:z"},
		{h("idempotency-key", "lower"), "lower"},
		{h("X-Idempotency-Key", "alias"), "alias"},
		{h("Idempotency-Key", `"quoted"`), "quoted"},
		{h("Idempotency-Key", "same", "X-Idempotency-Key", `"same"`), "same"},
		{h("Idempotency-Key", strings.Repeat("k", wire.MaxKeyLen)), strings.Repeat("k", wire.MaxKeyLen)},
	}
	for _, c := range valid {
		got, ok, err := wire.ParseKey(c.header)
		if err != nil || !ok || got != c.want {
			t.Fatalf("ParseKey(%v) = %q, %v, %v; want %q", c.header, got, ok, err, c.want)
		}
	}
	if _, ok, err := wire.ParseKey(h()); ok || err != nil {
		t.Fatalf("no header: ok=%v err=%v", ok, err)
	}
	invalid := []http.Header{
		h("Idempotency-Key", ""),
		h("Idempotency-Key", `""`),
		h("Idempotency-Key", strings.Repeat("k", wire.MaxKeyLen+1)),
		h("Idempotency-Key", "has space"),
		h("Idempotency-Key", "clé"),
		h("Idempotency-Key", "a", "X-Idempotency-Key", "b"),
		h("Idempotency-Key", "a", "Idempotency-Key", "a"),
	}
	for _, hdr := range invalid {
		_, present, err := wire.ParseKey(hdr)
		if !present || !errors.Is(err, wire.ErrInvalidKey) {
			t.Fatalf("ParseKey(%v) = present %v, error %v; want ErrInvalidKey", hdr, present, err)
		}
		if reason := wire.KeyReason(err); strings.Contains(reason, wire.ErrInvalidKey.Error()) || reason == "" {
			t.Fatalf("KeyReason(%v) = %q", err, reason)
		}
	}
}

func TestGenericCodes(t *testing.T) {
	t.Parallel()
	seen := map[wire.Code]bool{}
	retryable := map[wire.Code]bool{}
	for _, info := range wire.Generic() {
		if err := info.Validate(); err != nil {
			t.Fatalf("generic code %q: %v", info.Code, err)
		}
		if seen[info.Code] {
			t.Fatalf("generic code %q listed twice", info.Code)
		}
		seen[info.Code] = true
		if got, ok := wire.LookupGeneric(info.Code); !ok || got != info {
			t.Fatalf("LookupGeneric(%q) = %+v, %v", info.Code, got, ok)
		}
		if info.Retryable {
			retryable[info.Code] = true
		}
	}
	// DESIGN §5 "Retry signals": exactly these answers may be retried with
	// the same ID or key.
	want := map[wire.Code]bool{wire.CodeRequestInProgress: true, wire.CodeOutcomePending: true,
		wire.CodeTooManyRequests: true, wire.CodeUnavailable: true}
	if len(retryable) != len(want) {
		t.Fatalf("retryable generic codes = %v, want %v", retryable, want)
	}
	for c := range want {
		if !retryable[c] {
			t.Fatalf("%q is not retryable", c)
		}
	}
	for _, business := range []wire.Code{"card_declined", "currency_mismatch"} {
		if _, ok := wire.LookupGeneric(business); ok {
			t.Fatalf("%q is a business code and must not be generic", business)
		}
	}
}

func TestCodeInfoValidate(t *testing.T) {
	t.Parallel()
	bad := []wire.CodeInfo{
		{Code: "", Status: 402, Title: "x"},
		{Code: "Bad-Code", Status: 402, Title: "x"},
		{Code: "ok", Status: 302, Title: "x"},
		{Code: "ok", Status: 402, Title: ""},
		{Code: "ok", Status: 402, Title: "x", Retryable: true},
		{Code: "ok", Status: 503, Title: "x"},
	}
	for _, info := range bad {
		if err := info.Validate(); err == nil {
			t.Fatalf("Validate(%+v) = nil, want an error", info)
		}
	}
	good := []wire.CodeInfo{
		{Code: "insufficient_funds", Status: 422, Title: "Insufficient funds"},
		{Code: "card_declined", Status: 402, Title: "Card declined"},
		{Code: "ledger_busy", Status: 409, Title: "Ledger busy", Retryable: true},
	}
	for _, info := range good {
		if err := info.Validate(); err != nil {
			t.Fatalf("Validate(%+v) = %v", info, err)
		}
	}
}

func TestIsJSONMediaType(t *testing.T) {
	t.Parallel()
	for ct, want := range map[string]bool{
		"":                                  true,
		"application/json":                  true,
		"application/json; charset=utf-8":   true,
		"Application/JSON":                  true,
		"application/merge-patch+json":      true,
		"application/problem+json":          true,
		"text/plain":                        false,
		"application/x-www-form-urlencoded": false,
		"multipart/form-data; boundary=x":   false,
		"application/+json":                 false,
		"application/jsonx":                 false,
		"text/json":                         false,
		";;;":                               false,
	} {
		if got := wire.IsJSONMediaType(ct); got != want {
			t.Fatalf("IsJSONMediaType(%q) = %v, want %v", ct, got, want)
		}
	}
}

func TestParseProblem(t *testing.T) {
	t.Parallel()
	body := []byte(`{"type":"urn:retrysafe:problem:insufficient_funds","title":"Insufficient funds","status":422,"code":"insufficient_funds","balance":3}`)
	p := wire.ParseProblem("application/problem+json", body)
	if p == nil || p.Code != "insufficient_funds" || p.Status != 422 || string(p.Extensions["balance"]) != "3" {
		t.Fatalf("ParseProblem = %+v", p)
	}
	if wire.ParseProblem("text/html", body) != nil || wire.ParseProblem("application/json", []byte(`{"id":"x"}`)) != nil {
		t.Fatal("ParseProblem accepted a body that is not a problem")
	}
}
