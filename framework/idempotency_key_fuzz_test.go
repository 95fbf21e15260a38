package framework

import (
	"errors"
	"net/http"
	"testing"

	"github.com/retrysafe/retrysafe/wire"
)

// FuzzIdempotencyKey feeds the key parser any pair of header values
// (NUL, invalid UTF-8, quotes, commas, lengths around the bound): it never
// panics, an accepted key is 1..255 characters of [A-Za-z0-9._:-], an
// accepted pair means the same key, and every refusal is
// idempotency_key_invalid.
func FuzzIdempotencyKey(f *testing.F) {
	f.Add("abc-123_x.y:z", "", false)
	f.Add(`"quoted"`, `quoted`, true)
	f.Add("a\x00b", "", false)
	f.Add("caf\xc3\xa9", "x", true)
	f.Add("\xff", "\xff", true)
	f.Add(` "a" `, "", false)
	f.Add("a,b", "", false)
	f.Add("\"", "\"\"", true)
	f.Fuzz(func(t *testing.T, canonical, alias string, withAlias bool) {
		h := http.Header{}
		if canonical != "" {
			h.Set(HeaderIdempotencyKey, canonical)
		}
		if withAlias {
			h.Set(HeaderXIdempotencyKey, alias)
		}
		key, ok, err := IdempotencyKey(h)
		if err != nil {
			if !errors.Is(err, ErrIdempotencyKeyInvalid) || !ok || key != "" {
				t.Fatalf("IdempotencyKey(%q, %q) = %q, %v, %v", canonical, alias, key, ok, err)
			}
			return
		}
		if !ok {
			if canonical != "" || withAlias {
				t.Fatalf("a present header reported absent: %q %q", canonical, alias)
			}
			return
		}
		if wire.ValidateKey(key) != nil || len(key) == 0 || len(key) > MaxIdempotencyKeyLen {
			t.Fatalf("accepted an invalid key %q", key)
		}
		if canonical != "" && withAlias && wire.UnquoteKey(canonical) != wire.UnquoteKey(alias) {
			t.Fatalf("accepted differing headers %q and %q", canonical, alias)
		}
		if KeyHash(key) != KeyHash(key) || len(KeyHash(key)) != 64 {
			t.Fatalf("KeyHash is not a stable SHA-256 hex")
		}
	})
}
