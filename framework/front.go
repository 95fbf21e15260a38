package framework

import (
	"net/http"
	"slices"
)

// Front is the request front of one write operation, the same for both
// patterns: it reads the body, answers a retry of bytes it has seen
// replayed from its [ReplayCache], binds the body into a Cmd ([Bind]: the
// one JSON check, the decode, defaults, validation) and fingerprints the
// command, then hands command and fingerprint to the pattern. A
// collection's PUT and legacy POST and every operation of the POST
// fallback serve their requests through one ([Front.Serve]); a
// collection's Put, PutTx and PATCH fingerprint through it
// ([Front.Fingerprint]).
type Front[Cmd any] struct {
	binder    *Binder
	operation string
	semantic  []string
	volatile  []string
	replays   *ReplayCache[Cmd]
}

// FrontConfig configures [NewFront].
type FrontConfig struct {
	// Operation names what the requests do in their fingerprints: the
	// resource's or the operation's name.
	Operation string
	// SemanticHeaders names request headers that change the meaning of a
	// request (an API version): their values are part of the fingerprint.
	// Defaults to none.
	SemanticHeaders []string
	// Volatile lists dotted JSON paths ("meta.trace") of command fields
	// left out of the fingerprint. Defaults to none.
	Volatile []string
	// ReplayCache is how many bytes of bodies the front keeps the bound
	// commands of, for retries of the same bytes ([ReplayCache]).
	// Defaults to [DefaultReplayCache]; negative keeps none.
	ReplayCache int
}

// NewFront returns the front of one operation, binding with b.
func NewFront[Cmd any](b *Binder, cfg FrontConfig) *Front[Cmd] {
	return &Front[Cmd]{binder: b, operation: cfg.Operation, semantic: slices.Clone(cfg.SemanticHeaders),
		volatile: slices.Clone(cfg.Volatile), replays: NewReplayCache[Cmd](cfg.ReplayCache)}
}

// Target is what a write applies to besides its body: with the command,
// what its fingerprint is a function of.
type Target struct {
	Tenant string
	// PathParams are the route's parameters ({"id": "…"}).
	PathParams map[string]string
	// Header holds the request's headers; the semantic ones count.
	Header http.Header
	// Replayable marks a request whose retries repeat what it names (a
	// PUT's ID, a POST's Idempotency-Key): only such a request is
	// answered from the replay cache or kept in it.
	Replayable bool
}

// Serve reads the body of r and serves the write t with it:
//
//  1. A replayable request whose body the front kept (a retry of bytes
//     already replayed) goes to reply, with the kept command and its
//     fingerprint. reply answers it when what it reads asks for no write
//     (a replay, a convergence, a refusal) and reports true; false sends
//     the request on, with nothing written. The kept command is shared:
//     reply must not change it.
//  2. The body is bound ([Bind]) and fingerprinted, and run serves the
//     command, writes the answer and reports whether it replayed an
//     earlier execution (or converged on one).
//  3. After a replay of a replayable request, the front keeps a command
//     bound anew for the next retry of the same bytes: nothing run did
//     to its own reaches it.
//
// Serve returns the error of the read, the bind or the fingerprint, with
// nothing written: the caller answers it.
func (f *Front[Cmd]) Serve(r *http.Request, t Target, reply func(cmd Cmd, fingerprint string) bool, run func(cmd Cmd, fingerprint string) (replayed bool)) error {
	body, err := f.binder.ReadBody(r)
	if err != nil {
		return err
	}
	var (
		key    ReplayKey
		cached bool
	)
	if t.Replayable {
		key, cached = f.key(t, body)
	}
	if cached {
		if e, ok := f.replays.Get(key); ok && reply(e.Command, e.Fingerprint) {
			return nil
		}
	}
	cmd, err := Bind[Cmd](f.binder, body)
	if err != nil {
		return err
	}
	fp, err := f.Fingerprint(t, cmd)
	if err != nil {
		return err
	}
	if run(cmd, fp) && cached {
		if kept, err := Bind[Cmd](f.binder, body); err == nil {
			f.replays.Add(key, body, &ReplayEntry[Cmd]{Command: kept, Fingerprint: fp})
		}
	}
	return nil
}

// Fingerprint returns the fingerprint of cmd applied to t, in its stored
// form ("v1:<64 hex digits>"): the SHA-256 of the canonical command
// (numbers in one spelling, keys sorted, the volatile fields left out)
// with the tenant, the operation, the path parameters and the semantic
// headers, under [FingerprintVersion].
func (f *Front[Cmd]) Fingerprint(t Target, cmd Cmd) (string, error) {
	return computeFingerprint(fingerprintInput{Tenant: t.Tenant, Operation: f.operation, PathParams: t.PathParams,
		Headers: semanticHeaders(t.Header, f.semantic), Command: cmd, Volatile: f.volatile})
}

// key is the replay cache's key of a request of t with body: its path
// parameters in the order of their names.
func (f *Front[Cmd]) key(t Target, body []byte) (ReplayKey, bool) {
	var names [4]string
	sorted := names[:0]
	for name := range t.PathParams {
		sorted = append(sorted, name)
	}
	slices.Sort(sorted)
	var pairs [8]string
	params := pairs[:0]
	for _, name := range sorted {
		params = append(params, name, t.PathParams[name])
	}
	return f.replays.Key(t.Tenant, params, t.Header, f.semantic, body)
}
