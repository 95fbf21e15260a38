package collection

import (
	"net/http"
	"testing"

	"github.com/google/uuid"
)

// TestReplayCacheKeySeparatesWhatTheFingerprintSeparates: each part the
// fingerprint depends on changes the key, a part's bytes never move into
// the next one's, and a body too large, a nil ID or a nil cache has no
// key.
func TestReplayCacheKeySeparatesWhatTheFingerprintSeparates(t *testing.T) {
	rc := newReplayCache[struct{}](4)
	id, other := uuid.New(), uuid.New()
	sem := []string{"Api-Version", "X-Region"}
	hdr := func(kv ...string) http.Header {
		h := http.Header{}
		for i := 0; i+1 < len(kv); i += 2 {
			h.Set(kv[i], kv[i+1])
		}
		return h
	}
	type input struct {
		tenant string
		id     uuid.UUID
		header http.Header
		body   string
	}
	base := input{"t1", id, hdr("Api-Version", "2"), `{"a":1}`}
	variants := []input{
		base,
		{"t2", id, base.header, base.body},
		{"t1", other, base.header, base.body},
		{"t1", id, hdr("Api-Version", "3"), base.body},
		{"t1", id, hdr("Api-Version", "2", "X-Region", "eu"), base.body},
		{"t1", id, hdr(), base.body},
		{"t1", id, base.header, `{"a":2}`},
		// The parts' bytes shifted from one part into the next.
		{"t1", id, hdr("Api-Version", "2{"), `"a":1}`},
		{"t", id, hdr("Api-Version", "2"), `{"a":1}`},
	}
	seen := map[[32]byte]int{}
	for i, v := range variants {
		k, ok := rc.key(v.tenant, v.id, v.header, sem, []byte(v.body))
		if !ok {
			t.Fatalf("variant %d has no key", i)
		}
		if j, dup := seen[k]; dup {
			t.Fatalf("variants %d and %d share a key", j, i)
		}
		seen[k] = i
	}
	// A header the resource does not name is not part of it.
	k1, _ := rc.key("t1", id, hdr("Api-Version", "2", "X-Trace", "1"), sem, []byte(base.body))
	k0, _ := rc.key("t1", id, base.header, sem, []byte(base.body))
	if k1 != k0 {
		t.Fatal("a header outside the semantic headers changed the key")
	}
	if _, ok := rc.key("t1", id, base.header, sem, make([]byte, MaxReplayCacheBody+1)); ok {
		t.Fatal("a body above MaxReplayCacheBody has a key")
	}
	if _, ok := rc.key("t1", id, base.header, sem, make([]byte, MaxReplayCacheBody)); !ok {
		t.Fatal("a body of MaxReplayCacheBody has no key")
	}
	if _, ok := rc.key("t1", uuid.Nil, base.header, sem, []byte(base.body)); ok {
		t.Fatal("the nil ID has a key")
	}
	var off *replayCache[struct{}]
	if _, ok := off.key("t1", id, base.header, sem, []byte(base.body)); ok || newReplayCache[struct{}](-1) != nil {
		t.Fatal("a cache that is off has a key")
	}
}
