package framework

import (
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
