package framework

import (
	"net/http"
	"testing"
)

// TestReplayCacheKeySeparatesWhatTheFingerprintSeparates: each part the
// fingerprint depends on changes the key, a part's bytes never move into
// the next one's, and a body too large or a nil cache has no
// key.
func TestReplayCacheKeySeparatesWhatTheFingerprintSeparates(t *testing.T) {
	rc := NewReplayCache[struct{}](4)
	id, other := []string{"7"}, []string{"8"}
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
		params []string
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
	variants = append(variants,
		// A parameter's bytes moved into the next, and a parameter more.
		input{"t1", []string{"7", "8"}, base.header, base.body},
		input{"t1", []string{"78"}, base.header, base.body},
		input{"t1", []string{"7", ""}, base.header, base.body},
	)
	seen := map[ReplayKey]int{}
	for i, v := range variants {
		k, ok := rc.Key(v.tenant, v.params, v.header, sem, []byte(v.body))
		if !ok {
			t.Fatalf("variant %d has no key", i)
		}
		if j, dup := seen[k]; dup {
			t.Fatalf("variants %d and %d share a key", j, i)
		}
		seen[k] = i
	}
	// A header the resource does not name is not part of it.
	k1, _ := rc.Key("t1", id, hdr("Api-Version", "2", "X-Trace", "1"), sem, []byte(base.body))
	k0, _ := rc.Key("t1", id, base.header, sem, []byte(base.body))
	if k1 != k0 {
		t.Fatal("a header outside the semantic headers changed the key")
	}
	if _, ok := rc.Key("t1", id, base.header, sem, make([]byte, MaxReplayCacheBody+1)); ok {
		t.Fatal("a body above MaxReplayCacheBody has a key")
	}
	if _, ok := rc.Key("t1", id, base.header, sem, make([]byte, MaxReplayCacheBody)); !ok {
		t.Fatal("a body of MaxReplayCacheBody has no key")
	}
	var off *ReplayCache[struct{}]
	if _, ok := off.Key("t1", id, base.header, sem, []byte(base.body)); ok || NewReplayCache[struct{}](-1) != nil {
		t.Fatal("a cache that is off has a key")
	}
}

// TestReplayCacheKeepsToItsBudget: the entries never count more than the
// budget, the least recently used make room, a key already kept is not
// counted twice, and a body above the budget is not kept.
func TestReplayCacheKeepsToItsBudget(t *testing.T) {
	rc := NewReplayCache[int](4 * 1024)
	body := func(n int) []byte { return make([]byte, n) }
	key := func(i int) ReplayKey {
		k, _ := rc.Key("t", []string{string(rune('a' + i))}, nil, nil, []byte("{}"))
		return k
	}
	for i := range 4 {
		rc.Add(key(i), body(1000), &ReplayEntry[int]{Command: i})
	}
	if n := rc.entries.Len(); n != 4 || rc.size.Load() != 4000 {
		t.Fatalf("%d entries counting %d, want 4 counting 4000", n, rc.size.Load())
	}
	rc.Add(key(0), body(1000), &ReplayEntry[int]{Command: 99})
	if e, _ := rc.Get(key(0)); e.Command != 0 || rc.size.Load() != 4000 {
		t.Fatalf("a second Add of a kept key replaced it (%d) or counted again (%d)", e.Command, rc.size.Load())
	}
	// key(0) is now the most recent: key(1) makes room for 2000 bytes,
	// then key(2).
	rc.Add(key(4), body(2000), &ReplayEntry[int]{Command: 4})
	if rc.size.Load() > 4096 {
		t.Fatalf("the entries count %d, over the budget", rc.size.Load())
	}
	for i, want := range []bool{true, false, false, true, true} {
		if _, ok := rc.Get(key(i)); ok != want {
			t.Fatalf("entry %d kept = %v, want %v", i, ok, want)
		}
	}
	// A small body counts minReplayCost; one above the budget is not kept.
	rc.Add(key(5), body(1), &ReplayEntry[int]{Command: 5})
	if e, ok := rc.Get(key(5)); !ok || e.cost != minReplayCost {
		t.Fatalf("a 1-byte body's entry: kept %v, cost %v", ok, e)
	}
	rc.Add(key(6), body(5000), &ReplayEntry[int]{Command: 6})
	if _, ok := rc.Get(key(6)); ok || rc.size.Load() > 4096 {
		t.Fatalf("a body above the budget was kept (size %d)", rc.size.Load())
	}
}
