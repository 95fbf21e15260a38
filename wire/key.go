package wire

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// MaxKeyLen is the longest idempotency key accepted.
const MaxKeyLen = 255

// ErrInvalidKey is wrapped by the errors of [ValidateKey] and [ParseKey]:
// the key is empty, longer than [MaxKeyLen], holds a character outside
// [A-Za-z0-9._:-], or Idempotency-Key and X-Idempotency-Key disagree.
var ErrInvalidKey = errors.New("invalid idempotency key")

// ParseKey reads the idempotency key of a request. Idempotency-Key is the
// canonical header and X-Idempotency-Key an alias; a value in
// Structured-Field string form ("abc") is unquoted first. present is false
// when neither header is sent. A repeated header is joined, so it fails
// validation instead of being reduced to its first value. The error wraps
// [ErrInvalidKey].
func ParseKey(h http.Header) (key string, present bool, err error) {
	canonical, hasCanonical := joined(h, HeaderIdempotencyKey)
	alias, hasAlias := joined(h, HeaderXIdempotencyKey)
	if !hasCanonical && !hasAlias {
		return "", false, nil
	}
	if hasCanonical && hasAlias && UnquoteKey(canonical) != UnquoteKey(alias) {
		return "", true, fmt.Errorf("%w: Idempotency-Key and X-Idempotency-Key differ", ErrInvalidKey)
	}
	raw := canonical
	if !hasCanonical {
		raw = alias
	}
	key = UnquoteKey(raw)
	if err := ValidateKey(key); err != nil {
		return "", true, err
	}
	return key, true, nil
}

func joined(h http.Header, name string) (string, bool) {
	values, ok := h[http.CanonicalHeaderKey(name)]
	if !ok {
		return "", false
	}
	return strings.Join(values, ","), true
}

// UnquoteKey trims blanks and removes the quotes of a Structured-Field
// string ("abc" → abc). Other values are returned trimmed.
func UnquoteKey(v string) string {
	v = strings.TrimSpace(v)
	if len(v) >= 2 && v[0] == '"' && v[len(v)-1] == '"' {
		return v[1 : len(v)-1]
	}
	return v
}

// ValidateKey reports whether key is a valid idempotency key: 1 to
// [MaxKeyLen] characters of [A-Za-z0-9._:-]. The error wraps
// [ErrInvalidKey] and says what is wrong in words a client can be shown.
func ValidateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: the idempotency key is empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: the idempotency key is longer than %d characters", ErrInvalidKey, MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == ':' || c == '-') {
			return fmt.Errorf("%w: the idempotency key may hold only A-Z a-z 0-9 . _ : - (offset %d)", ErrInvalidKey, i)
		}
	}
	return nil
}

// KeyReason returns the client-facing reason of a key error: err's text
// without the [ErrInvalidKey] prefix.
func KeyReason(err error) string {
	msg := err.Error()
	if rest, ok := strings.CutPrefix(msg, ErrInvalidKey.Error()+": "); ok {
		return rest
	}
	return msg
}
