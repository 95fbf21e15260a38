package framework

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"

	"github.com/retrysafe/retrysafe/wire"
)

// IdempotencyKey reads the request's idempotency key with [wire.ParseKey]:
// Idempotency-Key or its alias X-Idempotency-Key, a Structured-Field string
// ("abc") unquoted. It returns ok=false when neither header is present, and
// an idempotency_key_invalid *Error when the key is empty, longer than 255
// characters, outside [A-Za-z0-9._:-], or the two headers disagree.
func IdempotencyKey(h http.Header) (key string, ok bool, err error) {
	key, ok, err = wire.ParseKey(h)
	if err != nil {
		return "", ok, &Error{Code: wire.CodeIdempotencyKeyInvalid, Detail: wire.KeyReason(err)}
	}
	return key, ok, nil
}

// KeyHash is the SHA-256 of an idempotency key's bytes in lowercase hex
// (what `printf %s "$KEY" | sha256sum` prints, and the Go client logs as
// key_sha256): what logs, spans and the admin tool carry instead of the
// raw key.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}
