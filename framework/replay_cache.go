package framework

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"
	"sync"
	"sync/atomic"

	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultReplayCache is the budget of a [ReplayCache] made with 0: 1 MiB
// of kept bodies.
const DefaultReplayCache = 1 << 20

// MaxReplayCacheBody is the largest body whose command a [ReplayCache]
// keeps: a retry of a larger one binds it again.
const MaxReplayCacheBody = 8 << 10

// minReplayCost is what an entry counts against the budget at least, for
// what it holds besides its body's bytes: a budget of B keeps at most
// B/minReplayCost entries.
const minReplayCost = 512

// ReplayCache keeps, for the request front of an operation ([Front]),
// the bound command and the fingerprint of a body that was already
// replayed, keyed by a SHA-256 of what the fingerprint is a function of:
// the tenant, the path parameters, the semantic headers and the body's
// bytes (the operation is the cache's own). [Bind] (the JSON check, the
// decode, Default, validation, Check, Normalize) and the fingerprint are
// functions of those alone, so a retry of the same bytes finds what they
// would compute again; only the decision on what the retry reads (row or
// record: state, fingerprint, replay window) is made per request.
//
// The front gives a kept command only to an answer without a write (a
// replay, a convergence, a refusal); a retry whose row or record asks for
// a write binds its body again, so that nothing a write does to its
// command reaches the kept one, which every retry that finds it shares.
// It adds an entry only after a replay, from a command bound for the
// cache. A nil *ReplayCache keeps nothing.
//
// The same cache keeps any value that is a function of the parts its key
// hashes: package collection keeps the representation of a row version
// in one, keyed by the version's system columns.
//
// Its memory is bounded by a budget of body bytes: each entry counts its
// body's length, and at least minReplayCost; the least recently used
// entries make room. The decoded command an entry holds is of the order
// of its body's size.
type ReplayCache[Cmd any] struct {
	entries *lru.Cache[ReplayKey, *ReplayEntry[Cmd]]
	// budget is the most the entries may count; size what they count.
	budget int64
	size   atomic.Int64
}

// ReplayEntry is one kept command and its fingerprint (in the stored
// form, [Fingerprint.String]).
type ReplayEntry[Cmd any] struct {
	Command     Cmd
	Fingerprint string
	// cost is what the entry counts against the budget.
	cost int64
}

// ReplayKey is the key of one request in a [ReplayCache].
type ReplayKey [sha256.Size]byte

// NewReplayCache returns a cache whose entries count at most budget bytes
// of bodies: [DefaultReplayCache] when budget is 0, no cache (nil) when it
// is negative.
func NewReplayCache[Cmd any](budget int) *ReplayCache[Cmd] {
	if budget < 0 {
		return nil
	}
	if budget == 0 {
		budget = DefaultReplayCache
	}
	rc := &ReplayCache[Cmd]{budget: int64(budget)}
	entries, err := lru.NewWithEvict(max(budget/minReplayCost, 1), func(_ ReplayKey, e *ReplayEntry[Cmd]) { rc.size.Add(-e.cost) })
	if err != nil { // only for a size ≤ 0
		panic(err)
	}
	rc.entries = entries
	return rc
}

// keyer is what a key is computed with: a SHA-256 state and a buffer
// for the parts before the body.
type keyer struct {
	h   hash.Hash
	buf []byte
}

// keyers recycles the states keys are computed with.
var keyers = sync.Pool{New: func() any { return &keyer{h: sha256.New(), buf: make([]byte, 0, 256)} }}

// Key returns the key of a request whose path parameters are params (in
// the route's order), or false when the cache is nil or the body longer
// than [MaxReplayCacheBody]. Each part is written with its length, so
// that no two requests share a key.
func (rc *ReplayCache[Cmd]) Key(tenant string, params []string, header http.Header, semantic []string, body []byte) (k ReplayKey, ok bool) {
	if rc == nil || len(body) > MaxReplayCacheBody {
		return k, false
	}
	ky := keyers.Get().(*keyer)
	defer keyers.Put(ky)
	buf := appendPart(ky.buf[:0], tenant)
	buf = binary.AppendUvarint(buf, uint64(len(params)))
	for _, p := range params {
		buf = appendPart(buf, p)
	}
	// As the fingerprint reads them: the first value, "" when absent.
	for _, name := range semantic {
		buf = appendPart(buf, header.Get(name))
	}
	buf = binary.AppendUvarint(buf, uint64(len(body)))
	ky.h.Reset()
	ky.h.Write(buf)
	ky.h.Write(body)
	// The sum goes to the pooled buffer: a slice of k would escape.
	ky.buf = ky.h.Sum(buf[:0])
	copy(k[:], ky.buf)
	return k, true
}

// appendPart appends s with its length before it.
func appendPart(dst []byte, s string) []byte {
	return append(binary.AppendUvarint(dst, uint64(len(s))), s...)
}

// Get returns the entry of k.
func (rc *ReplayCache[Cmd]) Get(k ReplayKey) (*ReplayEntry[Cmd], bool) {
	return rc.entries.Get(k)
}

// Add keeps e, the command of body, under k unless k has an entry; the
// least recently used entries make room.
func (rc *ReplayCache[Cmd]) Add(k ReplayKey, body []byte, e *ReplayEntry[Cmd]) {
	e.cost = max(int64(len(body)), minReplayCost)
	if e.cost > rc.budget {
		return
	}
	if had, _ := rc.entries.ContainsOrAdd(k, e); had {
		return
	}
	rc.size.Add(e.cost)
	for rc.size.Load() > rc.budget {
		if _, _, ok := rc.entries.RemoveOldest(); !ok {
			return
		}
	}
}
