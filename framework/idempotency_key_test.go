package framework

import (
	"errors"
	"net/http"
	"strings"
	"testing"
)

func TestIdempotencyKey(t *testing.T) {
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
		{h("Idempotency-Key", strings.Repeat("k", 255)), strings.Repeat("k", 255)},
	}
	for _, c := range valid {
		got, ok, err := IdempotencyKey(c.header)
		if err != nil || !ok || got != c.want {
			t.Fatalf("IdempotencyKey(%v) = %q, %v, %v; want %q", c.header, got, ok, err, c.want)
		}
	}
	if _, ok, err := IdempotencyKey(h()); ok || err != nil {
		t.Fatalf("no header: ok=%v err=%v", ok, err)
	}
	invalid := []http.Header{
		h("Idempotency-Key", ""),
		h("Idempotency-Key", `""`),
		h("Idempotency-Key", strings.Repeat("k", 256)),
		h("Idempotency-Key", "has space"),
		h("Idempotency-Key", "clé"),
		h("Idempotency-Key", "a", "X-Idempotency-Key", "b"),
		h("Idempotency-Key", "a", "Idempotency-Key", "a"),
	}
	for _, hdr := range invalid {
		if _, _, err := IdempotencyKey(hdr); !errors.Is(err, ErrIdempotencyKeyInvalid) {
			t.Fatalf("IdempotencyKey(%v) error = %v, want idempotency_key_invalid", hdr, err)
		}
	}
}
