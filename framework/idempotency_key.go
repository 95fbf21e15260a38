package framework

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strings"
)

// MaxIdempotencyKeyLen is the longest idempotency key accepted.
const MaxIdempotencyKeyLen = 255

// IdempotencyKey reads the request's idempotency key. Idempotency-Key is the
// canonical header and X-Idempotency-Key an alias (header names are
// case-insensitive); a Structured-Field string ("abc") is unquoted. It
// returns ok=false when neither header is present, and an
// idempotency_key_invalid *Error when the key is empty, longer than 255
// characters, outside [A-Za-z0-9._:-], or the two headers disagree.
func IdempotencyKey(h http.Header) (key string, ok bool, err error) {
	canonical, hasCanonical := singleHeader(h, HeaderIdempotencyKey)
	alias, hasAlias := singleHeader(h, HeaderXIdempotencyKey)
	if !hasCanonical && !hasAlias {
		return "", false, nil
	}
	if hasCanonical && hasAlias && unquoteKey(canonical) != unquoteKey(alias) {
		return "", true, Errorf(CodeIdempotencyKeyInvalid, "Idempotency-Key and X-Idempotency-Key differ")
	}
	raw := canonical
	if !hasCanonical {
		raw = alias
	}
	key = unquoteKey(raw)
	if err := validateKey(key); err != nil {
		return "", true, err
	}
	return key, true, nil
}

// singleHeader returns a header's value; repeated fields are joined so that
// they fail validation instead of being silently reduced to the first.
func singleHeader(h http.Header, name string) (string, bool) {
	values, ok := h[http.CanonicalHeaderKey(name)]
	if !ok {
		return "", false
	}
	return strings.Join(values, ","), true
}

func unquoteKey(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

func validateKey(key string) error {
	switch {
	case key == "":
		return Errorf(CodeIdempotencyKeyInvalid, "the idempotency key is empty")
	case len(key) > MaxIdempotencyKeyLen:
		return Errorf(CodeIdempotencyKeyInvalid, "the idempotency key is longer than %d characters", MaxIdempotencyKeyLen)
	}
	for i := 0; i < len(key); i++ {
		c := key[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return Errorf(CodeIdempotencyKeyInvalid, "the idempotency key may hold only A-Z a-z 0-9 . _ : -")
		}
	}
	return nil
}

// KeyHash is the SHA-256 of an idempotency key in hex: what logs carry
// instead of the raw key.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
