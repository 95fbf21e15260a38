package framework

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"
)

// FuzzIdempotencyKey feeds the key parser any pair of header values
// (NUL, invalid UTF-8, quotes, commas, lengths around the bound): it never
// panics, an accepted key is 1..255 characters of [A-Za-z0-9._:-], an
// accepted pair means the same key, its telemetry.KeyHash is its SHA-256
// in hex, and every refusal is idempotency_key_invalid.
func FuzzIdempotencyKey(f *testing.F) {
	f.Add("abc-123_x.y:z", "", false)
	f.Add(`"quoted"`, `quoted`, true)
	f.Add("a\x00b", "", false)
	f.Add("caf\xc3\xa9", "x", true)
	f.Add("\xff", "\xff", true)
	f.Add(` "a" `, "", false)
	f.Add("a,b", "", false)
	f.Add("\"", "\"\"", true)
	f.Add("Order-1042:A", "", false)
	f.Add(strings.Repeat("k", 200)+"Z", "", false)
	f.Fuzz(func(t *testing.T, canonical, alias string, withAlias bool) {
		h := http.Header{}
		if canonical != "" {
			h.Set(wire.HeaderIdempotencyKey, canonical)
		}
		if withAlias {
			h.Set(wire.HeaderXIdempotencyKey, alias)
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
		if wire.ValidateKey(key) != nil || len(key) == 0 || len(key) > wire.MaxKeyLen {
			t.Fatalf("accepted an invalid key %q", key)
		}
		if canonical != "" && withAlias && wire.UnquoteKey(canonical) != wire.UnquoteKey(alias) {
			t.Fatalf("accepted differing headers %q and %q", canonical, alias)
		}
		wantKeyHash(t, key)
	})
}

// wantKeyHash checks that KeyHash(key) is the lowercase hex SHA-256 of the
// key's bytes, computed here by another path (what
// `printf %s "$KEY" | sha256sum` prints, and the Go client logs), and that
// a key differing in its last character hashes differently.
func wantKeyHash(t *testing.T, key string) {
	t.Helper()
	h := sha256.New()
	half := len(key) / 2
	_, _ = io.WriteString(h, key[:half])
	_, _ = io.WriteString(h, key[half:])
	if got, want := telemetry.KeyHash(key), fmt.Sprintf("%x", h.Sum(nil)); got != want {
		t.Fatalf("telemetry.KeyHash(%q) = %q, want the hex SHA-256 %q", key, got, want)
	}
	other := []byte(key)
	other[len(other)-1] ^= 1 // a different last byte
	if telemetry.KeyHash(string(other)) == telemetry.KeyHash(key) {
		t.Fatalf("telemetry.KeyHash(%q) == telemetry.KeyHash(%q)", other, key)
	}
}
