package retrysafetest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/wire"
)

// Kind is what the operation under test does; it decides which checks
// apply.
type Kind int

const (
	// PutCreateOnly is a PUT to Path that creates a resource no PUT
	// replaces (collection.CreateOnly): the same ID with another body is
	// 422.
	PutCreateOnly Kind = iota + 1
	// PutCreateOrReplace is a PUT to Path that creates a resource, or
	// replaces it (collection.CreateOrReplace): another body replaces, and
	// a replace with If-Match whose answer was lost converges.
	PutCreateOrReplace
	// Patch is a PATCH of Path, a resource that a PUT of
	// [Operation.Create] made: a merge patch, or any change whose retry
	// converges without If-Match.
	Patch
	// PostWithKey is a POST to Path with an Idempotency-Key
	// (fallback/postkeys).
	PostWithKey
)

func (k Kind) String() string {
	switch k {
	case PutCreateOnly:
		return "PutCreateOnly"
	case PutCreateOrReplace:
		return "PutCreateOrReplace"
	case Patch:
		return "Patch"
	case PostWithKey:
		return "PostWithKey"
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Tenant is one tenant of the service under test.
type Tenant struct {
	// Name is the tenant as [Config.CountFunc] receives it. Required.
	Name string
	// Header authenticates a request as the tenant, for example
	// Authorization: Bearer sk_test_acme. Required.
	Header http.Header
}

// Bearer is the tenant name whose requests carry Authorization: Bearer
// token.
func Bearer(name, token string) Tenant {
	return Tenant{Name: name, Header: http.Header{wire.HeaderAuthorization: {"Bearer " + token}}}
}

// Operation is the write under test. Each check writes resources of its
// own: in Path and in every body, {id} stands for a new UUID per case, so
// that a body can also vary a column that must be unique
// ("ada+{id}@example.com").
type Operation struct {
	// Kind is what the write does. Required.
	Kind Kind
	// Path is the path of the write: "/v1/customers/{id}" (PUT, PATCH; the
	// resource's GET is a GET of Path) or "/v1/credits" (POST). Required.
	Path string
	// Body is a valid body of the write, a JSON object. Required.
	Body []byte
	// OtherBody is a valid body that differs from Body in meaning: with
	// the same key or ID it is 422 (PutCreateOnly, PostWithKey), or it
	// replaces Body under If-Match (PutCreateOrReplace). Required for
	// these kinds.
	OtherBody []byte
	// Create is the body of the PUT to Path that makes the resource a
	// Patch changes. Required for Patch.
	Create []byte
	// ContentType is the Content-Type of Body and OtherBody. Defaults to
	// application/json.
	ContentType string
	// Header holds headers every request carries besides the tenant's,
	// such as a version header the operation declares semantic. Defaults
	// to none.
	Header http.Header
}

// Config says what [Run] checks and how.
type Config struct {
	// Handler is the service under test: Run serves it on a local HTTP
	// server of its own. Set Handler or URL.
	Handler http.Handler
	// URL is the base URL of a service already running, plain HTTP
	// (http://host:port, or http://host:port/api: Operation.Path is then
	// under /api). Set Handler or URL.
	URL string
	// Tenants are two tenants of the service: the checks write as the
	// first, and the second must see none of it. Nothing else may write
	// for them while Run runs. Required.
	Tenants [2]Tenant
	// Operation is the write under test. Required.
	Operation Operation
	// CountFunc counts the effects of the tenant's writes, so that each
	// create, replace, patch or POST adds exactly one: the rows of a
	// create-only resource, the sum of the versions of a mutable one, the
	// events in the outbox, the charges at a provider. The checks assert
	// on it, not on statuses alone. Required.
	CountFunc func(ctx context.Context, tenant string) (int64, error)
	// Concurrency is how many identical requests the Concurrent check
	// sends at once. Defaults to 8.
	Concurrency int
	// Timeout bounds each check, the retries of a 409 included. Defaults
	// to a minute.
	Timeout time.Duration
}

// validate checks c and fills in its defaults.
func (c *Config) validate() error {
	var errs []error
	if (c.Handler == nil) == (c.URL == "") {
		errs = append(errs, errors.New("set Handler or URL"))
	}
	if c.URL != "" {
		if u, err := url.Parse(c.URL); err != nil || u.Scheme != "http" || u.Host == "" {
			errs = append(errs, fmt.Errorf("URL %q is not a plain-HTTP base URL (http://host:port)", c.URL))
		}
	}
	for i, tn := range c.Tenants {
		if tn.Name == "" || len(tn.Header) == 0 {
			errs = append(errs, fmt.Errorf("Tenants[%d] needs a Name and a Header", i))
		}
	}
	if c.Tenants[0].Name == c.Tenants[1].Name {
		errs = append(errs, errors.New("Tenants name the same tenant twice"))
	}
	if c.CountFunc == nil {
		errs = append(errs, errors.New("CountFunc is required"))
	}
	op := &c.Operation
	if op.Kind < PutCreateOnly || op.Kind > PostWithKey {
		errs = append(errs, fmt.Errorf("Operation.Kind %v is not one of PutCreateOnly, PutCreateOrReplace, Patch, PostWithKey", op.Kind))
	}
	if !strings.HasPrefix(op.Path, "/") {
		errs = append(errs, fmt.Errorf("Operation.Path %q does not start with /", op.Path))
	} else if op.Kind != PostWithKey && !strings.Contains(op.Path, "{id}") {
		errs = append(errs, fmt.Errorf("Operation.Path %q of a %v has no {id}", op.Path, op.Kind))
	}
	if _, err := members(op.Body); err != nil {
		errs = append(errs, fmt.Errorf("Operation.Body: %w", err))
	}
	if op.Kind == PutCreateOnly || op.Kind == PutCreateOrReplace || op.Kind == PostWithKey {
		if len(op.OtherBody) == 0 || string(op.OtherBody) == string(op.Body) {
			errs = append(errs, fmt.Errorf("a %v needs an OtherBody that differs from Body", op.Kind))
		}
	}
	if op.Kind == Patch && len(op.Create) == 0 {
		errs = append(errs, errors.New("a Patch needs the Create body of the PUT that makes the resource"))
	}
	if c.Concurrency < 0 || c.Timeout < 0 {
		errs = append(errs, errors.New("Concurrency and Timeout may not be negative"))
	}
	if c.Concurrency == 0 {
		c.Concurrency = 8
	}
	if c.Timeout == 0 {
		c.Timeout = time.Minute
	}
	if op.ContentType == "" {
		op.ContentType = wire.ContentTypeJSON
	}
	return errors.Join(errs...)
}

// Run checks that the operation keeps the promises of a retry-safe
// write, each as a subtest of t named after its check: LostAnswer,
// Concurrent, DifferentBody, MemberNames, OtherTenant and
// ConditionalLostAnswer (see the package's documentation). A check the
// operation's kind makes meaningless is skipped with the reason. The
// checks run one after another, each on resources of its own. A Config
// that cannot work stops t at once.
func Run(t *testing.T, cfg Config) {
	t.Helper()
	run(t, cfg, func(name string, f func(testing.TB)) {
		t.Run(name, func(t *testing.T) { f(t) })
	})
}

// run starts the kit on tb and runs every check through runCheck, which
// runs f as a test of name (t.Run for Run; a test of the kit's own runs
// it inside a fake TB to see it fail).
func run(tb testing.TB, cfg Config, runCheck func(name string, f func(testing.TB))) {
	tb.Helper()
	k := start(tb, cfg)
	for _, c := range checks {
		runCheck(c.name, func(tb testing.TB) {
			if reason := c.skip(k.cfg.Operation.Kind); reason != "" {
				tb.Skip(reason)
			}
			ctx, cancel := context.WithTimeout(tb.Context(), k.cfg.Timeout)
			defer cancel()
			c.run(k, ctx, tb)
		})
	}
}

// kit is the service under test behind a lost-answer proxy, and a client
// of it.
type kit struct {
	cfg    Config
	origin string // the proxy's URL: http://host:port
	prefix string // the path of Config.URL, before Operation.Path
	client *http.Client

	mu    sync.Mutex
	drops map[string]chan []byte // armed drops by exchange; each receives the answer it dropped
}

func start(tb testing.TB, cfg Config) *kit {
	tb.Helper()
	if err := cfg.validate(); err != nil {
		tb.Fatalf("retrysafetest: %v", err)
	}
	target := cfg.URL
	if cfg.Handler != nil {
		srv := httptest.NewServer(cfg.Handler)
		tb.Cleanup(srv.Close)
		target = srv.URL
	}
	u, _ := url.Parse(target)
	k := &kit{cfg: cfg, drops: map[string]chan []byte{}}
	proxy, err := StartProxy(u.Host, ProxyConfig{DropAnswerFunc: k.drop})
	if err != nil {
		tb.Fatalf("retrysafetest: start the proxy: %v", err)
	}
	tb.Cleanup(proxy.Close)
	k.origin, k.prefix = "http://"+proxy.Addr(), strings.TrimSuffix(u.Path, "/")
	// A new connection per request: Go's transport sends a request with
	// an Idempotency-Key again by itself when a reused connection closes
	// without an answer, which would hide the lost answer from the check.
	k.client = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	tb.Cleanup(k.client.CloseIdleConnections)
	return k
}

// exchange names a request for the proxy.
func exchange(r *http.Request) string {
	return r.Method + " " + r.URL.Path + " " + r.Header.Get(wire.HeaderIdempotencyKey) + " " + r.Header.Get(wire.HeaderIfMatch)
}

// drop is the proxy's DropAnswerFunc: it drops the answer of an exchange
// armed by lose, once.
func (k *kit) drop(r *http.Request, answer []byte) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	ch, ok := k.drops[exchange(r)]
	if !ok {
		return false
	}
	delete(k.drops, exchange(r))
	ch <- answer
	return true
}

// newCase is the next case: a new ID, the key of a POST, and the
// operation with {id} replaced.
func (k *kit) newCase() *testCase {
	id := uuid.NewString()
	op := k.cfg.Operation
	fill := func(b []byte) []byte { return []byte(strings.ReplaceAll(string(b), "{id}", id)) }
	c := &testCase{k: k, id: id, path: strings.ReplaceAll(op.Path, "{id}", id),
		body: fill(op.Body), other: fill(op.OtherBody), create: fill(op.Create)}
	if op.Kind == PostWithKey {
		c.key = "retrysafetest-" + id
	}
	return c
}
