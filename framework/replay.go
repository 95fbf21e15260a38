package framework

import (
	"net/http"

	"github.com/retrysafe/retrysafe/wire"
)

// Reply describes a successful response of either pattern: the PUT engine
// and the POST fallback both write through [WriteReply], so replays look the
// same on the wire whichever pattern produced them.
type Reply struct {
	Status int
	// Body is the JSON body, written as is.
	Body []byte
	// Header holds extra stored headers (a replayed response's allow-list).
	Header http.Header
	// Replayed marks a response that repeats an earlier execution.
	Replayed bool
	// Key, when set, is echoed as Idempotency-Key.
	Key      string
	Location string
	ETag     string
}

// WriteReply writes r: stored headers first, then the replay headers, then
// the status and body.
func WriteReply(w http.ResponseWriter, r Reply) {
	h := w.Header()
	for k, v := range r.Header {
		h[k] = append([]string(nil), v...)
	}
	if h.Get(wire.HeaderContentType) == "" && len(r.Body) > 0 {
		h.Set(wire.HeaderContentType, wire.ContentTypeJSON+"; charset=utf-8")
	}
	if r.Replayed {
		h.Set(wire.HeaderIdempotentReplayed, "true")
	}
	if r.Key != "" {
		h.Set(wire.HeaderIdempotencyKey, r.Key)
	}
	if r.Location != "" {
		h.Set(wire.HeaderLocation, r.Location)
	}
	if r.ETag != "" {
		h.Set(wire.HeaderETag, r.ETag)
	}
	w.WriteHeader(r.Status)
	if len(r.Body) > 0 {
		_, _ = w.Write(r.Body)
	}
}
