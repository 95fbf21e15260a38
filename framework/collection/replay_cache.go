package collection

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"
	"net/http"
	"sync"
	"sync/atomic"

	"github.com/google/uuid"
	lru "github.com/hashicorp/golang-lru/v2"
)

// DefaultReplayCache is how many commands a collection's HTTP handlers
// keep for retries of the same bytes when [Resource.ReplayCache] is 0.
const DefaultReplayCache = 1024

// MaxReplayCacheBody is the largest body whose command is kept: a retry
// of a larger one binds it again.
const MaxReplayCacheBody = 8 << 10

// replayCache keeps, for the PUT and legacy POST handlers, the bound
// command and the fingerprint of a body that was already replayed, keyed
// by a SHA-256 of what the fingerprint is a function of: the tenant, the
// resource ID, the semantic headers and the body's bytes. Binding
// ([framework.Bind]: the JSON checks, the decode, Default, validation,
// Check, Normalize), ModelFunc and the fingerprint are functions of those
// alone, so a retry of the same bytes finds what they would compute again,
// and only the decision on the row it reads (tenant, fingerprint, state,
// replay window) is made per request. Entries are added only after a
// replay or a convergence, from a command bound for the cache: a write
// sets the keys of the child rows it inserts on its own command, so that
// one is never kept. A nil cache keeps nothing.
type replayCache[Cmd any] struct {
	entries *lru.Cache[[sha256.Size]byte, *replayEntry[Cmd]]
	// hits counts the requests answered from an entry; fallbacks those
	// whose row asked for a write, which then bound their body again.
	hits, fallbacks atomic.Int64
}

// replayEntry is one kept command. cmd is shared by every retry that
// finds it: a hit copies the struct, and nothing on the replay path
// writes through it (RenderFunc must not modify its model).
type replayEntry[Cmd any] struct {
	cmd         Cmd
	fingerprint string
}

func newReplayCache[Cmd any](size int) *replayCache[Cmd] {
	if size < 0 {
		return nil
	}
	if size == 0 {
		size = DefaultReplayCache
	}
	entries, err := lru.New[[sha256.Size]byte, *replayEntry[Cmd]](size)
	if err != nil { // only for a size ≤ 0
		panic(err)
	}
	return &replayCache[Cmd]{entries: entries}
}

// hashers recycles the SHA-256 states the keys are computed with.
var hashers = sync.Pool{New: func() any { return sha256.New() }}

// key returns the cache key of a request, or false when the cache is off
// or the body too large to keep. Each variable-length part is written
// with its length, so that no two requests share a key.
func (rc *replayCache[Cmd]) key(tenant string, id uuid.UUID, header http.Header, semantic []string, body []byte) (k [sha256.Size]byte, ok bool) {
	if rc == nil || len(body) > MaxReplayCacheBody || id == uuid.Nil {
		return k, false
	}
	h := hashers.Get().(hash.Hash)
	defer hashers.Put(h)
	h.Reset()
	var n [binary.MaxVarintLen64]byte
	part := func(s []byte) {
		h.Write(n[:binary.PutUvarint(n[:], uint64(len(s)))])
		h.Write(s)
	}
	part([]byte(tenant))
	h.Write(id[:])
	// As framework.SemanticHeaders reads them: the first value, "" when
	// absent.
	for _, name := range semantic {
		part([]byte(header.Get(name)))
	}
	part(body)
	h.Sum(k[:0])
	return k, true
}

func (rc *replayCache[Cmd]) get(k [sha256.Size]byte) (*replayEntry[Cmd], bool) {
	return rc.entries.Get(k)
}

func (rc *replayCache[Cmd]) add(k [sha256.Size]byte, e *replayEntry[Cmd]) {
	rc.entries.Add(k, e)
}
