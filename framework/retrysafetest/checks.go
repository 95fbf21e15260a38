package retrysafetest

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/retrysafe/retrysafe/wire"
)

// checks are what [Run] checks, in order; skip says why a kind makes a
// check meaningless.
var checks = []struct {
	name string
	skip func(Kind) string
	run  func(k *kit, ctx context.Context, tb testing.TB)
}{
	{"LostAnswer", always, (*kit).lostAnswer},
	{"Concurrent", always, (*kit).concurrent},
	{"DifferentBody", func(kind Kind) string {
		switch kind {
		case PutCreateOrReplace:
			return "another body replaces a create-or-replace resource: ConditionalLostAnswer checks the replace"
		case Patch:
			return "a PATCH has no key: another patch is another change"
		}
		return ""
	}, (*kit).differentBody},
	{"MemberNames", always, (*kit).memberNames},
	{"OtherTenant", always, (*kit).otherTenant},
	{"ConditionalLostAnswer", func(kind Kind) string {
		switch kind {
		case PutCreateOnly:
			return "a create-only resource has no conditional write"
		case PostWithKey:
			return "a POST has no If-Match"
		}
		return ""
	}, (*kit).conditionalLostAnswer},
}

func always(Kind) string { return "" }

// lostAnswer: the proxy loses the answer of the write after the service
// committed it; two retries get that answer byte for byte, as a replay,
// and the write had one effect.
func (k *kit) lostAnswer(ctx context.Context, tb testing.TB) {
	c := k.newCase()
	c.prepare(ctx, tb, 0)
	before := k.count(ctx, tb, 0)
	w := c.write(0, c.body)
	lost := k.lose(ctx, tb, w)
	wantSuccess(tb, "the write whose answer was lost", lost)
	for i := range 2 {
		wantReplay(tb, fmt.Sprintf("retry %d after the lost answer", i+1), lost, k.do(ctx, tb, w))
	}
	k.wantEffects(ctx, tb, 0, before, 1, "a write whose answer was lost, retried twice")
}

// concurrent: Concurrency identical requests at once; each gets the same
// successful answer, at once or after retrying a 409 that asks for it,
// and the write had one effect.
func (k *kit) concurrent(ctx context.Context, tb testing.TB) {
	c := k.newCase()
	c.prepare(ctx, tb, 0)
	before := k.count(ctx, tb, 0)
	w := c.write(0, c.body)
	n := k.cfg.Concurrency
	answers, retried, errs := make([]answer, n), make([]int, n), make([]error, n)
	gate := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-gate
			answers[i], retried[i], errs[i] = k.converge(ctx, w)
		})
	}
	close(gate)
	wg.Wait()
	conflicts := 0
	for i, a := range answers {
		if errs[i] != nil {
			tb.Fatalf("request %d of %d sent at once: %v", i+1, n, errs[i])
		}
		wantSuccess(tb, fmt.Sprintf("request %d of %d sent at once", i+1, n), a)
		if a.status != answers[0].status || string(a.body) != string(answers[0].body) {
			tb.Fatalf("requests sent at once got different answers:\n%s\nand\n%s\n%s", answers[0], a, firstDifference(answers[0].body, a.body))
		}
		conflicts += retried[i]
	}
	k.wantEffects(ctx, tb, 0, before, 1, fmt.Sprintf("%d identical requests at once", n))
	tb.Logf("%d identical requests at once: one effect, one answer; %d answers asked for a retry (409)", n, conflicts)
}

// differentBody: the same key or ID with another body is 422
// idempotency_key_reuse and has no effect; the first body still replays.
func (k *kit) differentBody(ctx context.Context, tb testing.TB) {
	c := k.newCase()
	before := k.count(ctx, tb, 0)
	first := k.do(ctx, tb, c.write(0, c.body))
	wantSuccess(tb, "the write", first)
	wantProblem(tb, "the same "+c.keyOrID()+" with OtherBody", k.do(ctx, tb, c.write(0, c.other)),
		http.StatusUnprocessableEntity, wire.CodeIdempotencyKeyReuse)
	wantReplay(tb, "the first body again", first, k.do(ctx, tb, c.write(0, c.body)))
	k.wantEffects(ctx, tb, 0, before, 1, "a write and the same "+c.keyOrID()+" with another body")
}

// memberNames: the body with a member name spelled another way (another
// case, a Unicode fold: U+017F for s, U+212A for k), beside the right one
// or instead of it, or a member twice, is 400 and stores nothing: the
// valid body afterwards is a first write, not a replay.
func (k *kit) memberNames(ctx context.Context, tb testing.TB) {
	c := k.newCase()
	c.prepare(ctx, tb, 0)
	before := k.count(ctx, tb, 0)
	spelled := spellings(c.body, c.other)
	folds := 0
	for _, s := range spelled {
		if s.fold {
			folds++
		}
		a := k.do(ctx, tb, c.write(0, s.body))
		if a.status != http.StatusBadRequest || (a.code() != wire.CodeValidationFailed && a.code() != wire.CodeMalformedJSON) {
			tb.Errorf("a body with %s: %s; want 400 validation_failed or malformed_json\nbody: %s", s.what, a, s.body)
		}
	}
	k.wantEffects(ctx, tb, 0, before, 0, fmt.Sprintf("%d bodies that spell a member's name another way", len(spelled)))
	valid := k.do(ctx, tb, c.write(0, c.body))
	wantSuccess(tb, "the valid body after the refused ones", valid)
	if valid.header.Get(wire.HeaderIdempotentReplayed) != "" {
		tb.Fatalf("the valid body after the refused ones was answered as a replay: a refused body was stored under the %s\n%s", c.keyOrID(), valid)
	}
	k.wantEffects(ctx, tb, 0, before, 1, "the valid body after the refused ones")
	if folds == 0 {
		tb.Logf("no member name of Body has an s or a k: the U+017F and U+212A spellings do not apply")
	}
	tb.Logf("refused %d spellings of member names", len(spelled))
}

// otherTenant: the second tenant cannot read or change what the first
// wrote, and its own write with the same ID or key is its own: a first
// write, with its own effect, that leaves the first tenant's alone.
func (k *kit) otherTenant(ctx context.Context, tb testing.TB) {
	c := k.newCase()
	c.prepare(ctx, tb, 0)
	first := k.do(ctx, tb, c.write(0, c.body))
	wantSuccess(tb, "the first tenant's write", first)
	a0, b0 := k.count(ctx, tb, 0), k.count(ctx, tb, 1)

	read := request{tenant: 1, method: http.MethodGet, path: c.path}
	if k.cfg.Operation.Kind == PostWithKey {
		read.path, read.located = pathOf(first.header.Get(wire.HeaderLocation)), true
	}
	if read.path != "" {
		wantProblem(tb, "the second tenant's GET of the first tenant's resource", k.do(ctx, tb, read),
			http.StatusNotFound, wire.CodeNotFound)
	} else {
		tb.Logf("the POST's answer has no Location: no resource to read as the second tenant")
	}
	if k.cfg.Operation.Kind == Patch {
		wantProblem(tb, "the second tenant's PATCH of the first tenant's resource", k.do(ctx, tb, c.write(1, c.body)),
			http.StatusNotFound, wire.CodeNotFound)
	}
	k.wantEffects(ctx, tb, 1, b0, 0, "the second tenant's reads")
	k.wantEffects(ctx, tb, 0, a0, 0, "the second tenant's reads")

	own := 1
	if c.prepare(ctx, tb, 1) {
		own++
	}
	mine := k.do(ctx, tb, c.write(1, c.body))
	wantSuccess(tb, "the second tenant's write with the same "+c.keyOrID(), mine)
	if mine.header.Get(wire.HeaderIdempotentReplayed) != "" {
		tb.Fatalf("the second tenant's write with the first tenant's %s was answered as a replay:\n%s", c.keyOrID(), mine)
	}
	k.wantEffects(ctx, tb, 1, b0, int64(own), "the second tenant's own write")
	k.wantEffects(ctx, tb, 0, a0, 0, "the second tenant's own write")
	wantReplay(tb, "the first tenant's retry after the second tenant's write", first, k.do(ctx, tb, c.write(0, c.body)))
}

// conditionalLostAnswer: a replace (PutCreateOrReplace: OtherBody) or a
// patch (Patch) with If-Match whose answer was lost is retried with the
// same If-Match, now stale: it converges on that answer, the write had
// one effect, and a GET shows the version it made.
func (k *kit) conditionalLostAnswer(ctx context.Context, tb testing.TB) {
	c := k.newCase()
	create, w := c.body, c.write(0, c.body)
	if k.cfg.Operation.Kind == PutCreateOrReplace {
		w = c.put(0, c.other)
	} else {
		create = c.create
	}
	created := k.do(ctx, tb, c.put(0, create))
	wantSuccess(tb, "the create", created)
	w.ifMatch = created.header.Get(wire.HeaderETag)
	if w.ifMatch == "" {
		tb.Fatalf("the create answered no ETag, which a conditional write needs:\n%s", created)
	}
	before := k.count(ctx, tb, 0)
	lost := k.lose(ctx, tb, w)
	wantSuccess(tb, "the conditional write whose answer was lost", lost)
	wantReplay(tb, "its retry with the same If-Match", lost, k.do(ctx, tb, w))
	k.wantEffects(ctx, tb, 0, before, 1, "a conditional write whose answer was lost, and its retry")
	got := k.do(ctx, tb, request{tenant: 0, method: http.MethodGet, path: c.path})
	if got.status != http.StatusOK || got.header.Get(wire.HeaderETag) != lost.header.Get(wire.HeaderETag) {
		tb.Fatalf("a GET after the retry: %s\nwant 200 with the ETag %s of the write whose answer was lost", got, lost.header.Get(wire.HeaderETag))
	}
}

// testCase is the resource (or key) one check writes.
type testCase struct {
	k                   *kit
	id, key, path       string
	body, other, create []byte
}

// keyOrID names what identifies the write, for messages.
func (c *testCase) keyOrID() string {
	if c.key != "" {
		return "Idempotency-Key"
	}
	return "ID"
}

// write is the operation under test as tenant, with body.
func (c *testCase) write(tenant int, body []byte) request {
	method := http.MethodPut
	switch c.k.cfg.Operation.Kind {
	case Patch:
		method = http.MethodPatch
	case PostWithKey:
		method = http.MethodPost
	}
	return request{tenant: tenant, method: method, path: c.path, key: c.key, body: body}
}

// put is a PUT of body to the case's path as tenant.
func (c *testCase) put(tenant int, body []byte) request {
	return request{tenant: tenant, method: http.MethodPut, path: c.path, body: body}
}

// prepare makes the resource a Patch changes, as tenant, and reports
// whether it did.
func (c *testCase) prepare(ctx context.Context, tb testing.TB, tenant int) bool {
	tb.Helper()
	if c.k.cfg.Operation.Kind != Patch {
		return false
	}
	wantSuccess(tb, "the PUT of Create that makes the resource to patch", c.k.do(ctx, tb, c.put(tenant, c.create)))
	return true
}

// pathOf is the path of a Location, relative or absolute.
func pathOf(location string) string {
	if location == "" {
		return ""
	}
	u, err := url.Parse(location)
	if err != nil {
		return location
	}
	if u.RawQuery != "" {
		return u.Path + "?" + u.RawQuery
	}
	return u.Path
}

// count is CountFunc's count for tenant.
func (k *kit) count(ctx context.Context, tb testing.TB, tenant int) int64 {
	tb.Helper()
	n, err := k.cfg.CountFunc(ctx, k.cfg.Tenants[tenant].Name)
	if err != nil {
		tb.Fatalf("CountFunc(%q): %v", k.cfg.Tenants[tenant].Name, err)
	}
	return n
}

// wantEffects stops the check unless tenant's count moved by want since
// before.
func (k *kit) wantEffects(ctx context.Context, tb testing.TB, tenant int, before, want int64, after string) {
	tb.Helper()
	if got := k.count(ctx, tb, tenant) - before; got != want {
		tb.Fatalf("after %s, tenant %s has %d new effects (CountFunc), want %d", after, k.cfg.Tenants[tenant].Name, got, want)
	}
}

func wantSuccess(tb testing.TB, what string, a answer) {
	tb.Helper()
	if a.status/100 != 2 {
		tb.Fatalf("%s: %s\nwant a success (is the Operation's body valid?)", what, a)
	}
}

func wantProblem(tb testing.TB, what string, a answer, status int, code wire.Code) {
	tb.Helper()
	if a.status != status || a.code() != code {
		tb.Fatalf("%s: %s\nwant %d %s", what, a, status, code)
	}
}

// replayHeaders are the headers a replay repeats.
var replayHeaders = []string{wire.HeaderContentType, wire.HeaderLocation, wire.HeaderETag, wire.HeaderIdempotencyKey}

// wantReplay stops the check unless got is original replayed: the same
// status, body byte for byte and replay headers, and Idempotent-Replayed.
func wantReplay(tb testing.TB, what string, original, got answer) {
	tb.Helper()
	if got.status != original.status || string(got.body) != string(original.body) {
		tb.Fatalf("%s: %s\nwant the first answer byte for byte: %s\n%s", what, got, original, firstDifference(original.body, got.body))
	}
	for _, h := range replayHeaders {
		if got.header.Get(h) != original.header.Get(h) {
			tb.Fatalf("%s: %s is %q, the first answer's %q", what, h, got.header.Get(h), original.header.Get(h))
		}
	}
	if got.header.Get(wire.HeaderIdempotentReplayed) != "true" {
		tb.Fatalf("%s: the first answer again, without %s: true", what, wire.HeaderIdempotentReplayed)
	}
}

// firstDifference says where two bodies first differ.
func firstDifference(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) && i == len(b) {
		return "the bodies are equal"
	}
	excerpt := func(s []byte) string {
		return fmt.Sprintf("%q", s[i:min(len(s), i+24)])
	}
	return fmt.Sprintf("the bodies differ from byte %d: %s against %s", i, excerpt(a), excerpt(b))
}

// truncated cuts a body for a message.
func truncated(b []byte) string {
	const most = 600
	s := strings.ToValidUTF8(string(b), "\uFFFD")
	if len(s) > most {
		return s[:most] + "…"
	}
	return s
}
