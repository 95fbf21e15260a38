package client

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/wire"
)

// Client sends writes to a retrysafe API and retries them safely: every
// attempt of one logical operation carries the same resource ID or
// idempotency key, so the server applies it at most once and replays the
// original result. A Client is safe for concurrent use.
type Client struct {
	base    *url.URL
	cfg     Config
	backoff backoff

	mu    sync.Mutex
	token string
}

// New returns a Client for the API at baseURL (for example
// "https://api.example.com"; request paths are joined to it). cfg may be
// nil for the defaults; invalid settings return an error wrapping
// [ErrInvalidConfig].
func New(baseURL string, cfg *Config) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("%w: base URL: %w", ErrInvalidConfig, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q must be an absolute http(s) URL", ErrInvalidConfig, baseURL)
	}
	c, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Client{
		base:    u,
		cfg:     c,
		backoff: backoff{base: c.BaseDelay, max: c.MaxDelay, rand: c.RandFunc},
		token:   c.Token,
	}, nil
}

// Result is a successful (2xx) answer to [Client.Create] or [Client.Post].
type Result struct {
	// Status is the HTTP status, usually 201.
	Status int

	// Replayed is true when the server answered with
	// "Idempotent-Replayed: true": an earlier attempt (whose answer may
	// have been lost) or an earlier call already took effect, and this is
	// its original result.
	Replayed bool

	// Header and Body are the response's headers and body.
	Header http.Header
	Body   []byte

	// Location and ETag are copied from the response headers.
	Location string
	ETag     string

	// ID is the resource ID used by [Client.Create] (uuid.Nil for Post);
	// Key is the idempotency key used by [Client.Post] ("" for Create).
	ID  uuid.UUID
	Key string

	// Attempts is the number of requests sent, the successful one
	// included. It counts the re-sends that net/http's transport makes on
	// its own (a request with an Idempotency-Key, or a GET, whose reused
	// connection broke before any answer is silently sent again on a new
	// one), as far as the HTTPClient's transport reports them through
	// net/http/httptrace; [Config.MaxAttempts] caps the client's own tries.
	Attempts int
}

// CreateRequest is one logical create through the PUT pattern:
// PUT {base}{Collection}/{ID} with "If-None-Match: *".
type CreateRequest struct {
	// Collection is the collection path, for example "/v1/orders".
	// Required.
	Collection string

	// ID is the resource ID, chosen once for the logical operation and
	// reused on every attempt. Defaults to the ID stored for Operation in
	// [Config.KeyStore], or to a new UUID (see [Config.UUIDVersion]) saved
	// there before the first attempt.
	ID uuid.UUID

	// Operation names the logical operation in the [KeyStore] so that a
	// restarted process reuses the same ID. Defaults to "": the ID is not
	// persisted.
	Operation string

	// Body is the JSON representation to send. It is kept and re-sent
	// unchanged on every attempt.
	Body []byte

	// Value, when Body is nil, is marshalled once with encoding/json and
	// sent as the body. Defaults to nil.
	Value any

	// Header holds extra headers sent on every attempt. Content-Type
	// defaults to application/json.
	Header http.Header
}

// PostRequest is one logical operation through the POST fallback:
// POST {base}{Path} with "Idempotency-Key".
type PostRequest struct {
	// Path is the endpoint path, for example "/v1/payments". Required.
	Path string

	// Key is the idempotency key, 1–255 characters of [A-Za-z0-9._:-],
	// generated once for the logical operation and reused on every attempt.
	// Defaults to the key stored for Operation in [Config.KeyStore], or to a
	// new UUID string (see [Config.UUIDVersion]).
	Key string

	// Operation names the logical operation in the [KeyStore] so that a
	// restarted process reuses the same key; the key is saved before the
	// first request is sent. Defaults to "": the key is not persisted.
	Operation string

	// Body is the JSON request body. It is kept and re-sent unchanged on
	// every attempt.
	Body []byte

	// Value, when Body is nil, is marshalled once with encoding/json and
	// sent as the body. Defaults to nil.
	Value any

	// Header holds extra headers sent on every attempt. Content-Type
	// defaults to application/json.
	Header http.Header
}

// NewID returns a new resource ID of the configured [Config.UUIDVersion].
func (c *Client) NewID() (uuid.UUID, error) {
	if c.cfg.UUIDVersion == 4 {
		return uuid.NewRandomFromReader(c.cfg.RandReader)
	}
	return uuid.NewV7FromReader(c.cfg.RandReader)
}

// NewKey returns a new idempotency key: a UUID string of the configured
// [Config.UUIDVersion].
func (c *Client) NewKey() (string, error) {
	id, err := c.NewID()
	if err != nil {
		return "", err
	}
	return id.String(), nil
}

// Create creates a resource through the PUT pattern. It resolves the ID
// once (the one stored for req.Operation, else req.ID, else a new UUID,
// saved before the first attempt), then sends
// PUT {Collection}/{ID} with "If-None-Match: *", retrying per [Classify].
// A 201 with or without "Idempotent-Replayed" is success; [Result.Replayed]
// tells which.
//
// An error before the first attempt (bad request, KeyStore failure) is
// returned as is; every other error is an [*Error].
func (c *Client) Create(ctx context.Context, req CreateRequest) (*Result, error) {
	if strings.TrimSpace(req.Collection) == "" {
		return nil, fmt.Errorf("%w: Create: empty Collection", ErrInvalidRequest)
	}
	var explicit string
	if req.ID != uuid.Nil {
		explicit = req.ID.String()
	}
	body, err := marshalBody(req.Body, req.Value)
	if err != nil {
		return nil, err
	}
	idStr, err := c.resolve(ctx, req.Operation, explicit, false, func() (string, error) {
		id, err := c.NewID()
		return id.String(), err
	})
	if err != nil {
		return nil, err
	}
	id, err := uuid.Parse(idStr)
	if err != nil || id == uuid.Nil {
		return nil, fmt.Errorf("%w: Create: stored ID %q for operation %q is not a UUID", ErrInvalidRequest, idStr, req.Operation)
	}
	h := c.requestHeader(req.Header, body)
	h.Set(wire.HeaderIfNoneMatch, "*")
	res, err := c.do(ctx, &attempt{
		method: http.MethodPut,
		url:    c.base.JoinPath(req.Collection, id.String()).String(),
		header: h,
		body:   body,
		id:     id.String(),
		log:    slog.String("id", id.String()),
	})
	if err != nil {
		return nil, err
	}
	res.ID = id
	return res, nil
}

// Post sends a write through the POST fallback. It resolves the
// idempotency key once (the one stored for req.Operation, else req.Key,
// else a new one, saved before the first attempt), then sends POST {Path}
// with "Idempotency-Key", retrying with that same key per [Classify].
//
// A key stored for req.Operation longer ago than [Config.ReplayWindow] is
// not sent: the server has forgotten it and would run the operation again.
// Post returns a [*KeyExpiredError] instead (errors.Is [ErrKeyExpired]);
// find out whether the operation took effect, then [Client.Forget] it.
//
// An error before the first attempt (bad request, invalid key, expired
// key, KeyStore failure) is returned as is; every other error is an
// [*Error].
func (c *Client) Post(ctx context.Context, req PostRequest) (*Result, error) {
	if strings.TrimSpace(req.Path) == "" {
		return nil, fmt.Errorf("%w: Post: empty Path", ErrInvalidRequest)
	}
	if req.Key != "" {
		if err := ValidateKey(req.Key); err != nil {
			return nil, err
		}
	}
	body, err := marshalBody(req.Body, req.Value)
	if err != nil {
		return nil, err
	}
	key, err := c.resolve(ctx, req.Operation, req.Key, true, c.NewKey)
	if err != nil {
		return nil, err
	}
	if err := ValidateKey(key); err != nil {
		return nil, fmt.Errorf("Post: operation %q: %w", req.Operation, err)
	}
	h := c.requestHeader(req.Header, body)
	h.Set(wire.HeaderIdempotencyKey, key)
	sum := sha256.Sum256([]byte(key))
	res, err := c.do(ctx, &attempt{
		method: http.MethodPost,
		url:    c.base.JoinPath(req.Path).String(),
		header: h,
		body:   body,
		key:    key,
		log:    slog.String("key_sha256", hex.EncodeToString(sum[:])),
	})
	if err != nil {
		return nil, err
	}
	res.Key = key
	return res, nil
}

// Forget deletes the key or ID stored for operation in [Config.KeyStore].
// Call it once the outcome is known and recorded by the caller (a success
// it has acted on, or a definitive rejection such as 422 or 402 after which
// a new attempt needs a new key); never after an error whose
// [Error.OutcomeKnown] is false. Without a KeyStore it does nothing.
func (c *Client) Forget(ctx context.Context, operation string) error {
	if c.cfg.KeyStore == nil || operation == "" {
		return nil
	}
	return c.cfg.KeyStore.Delete(ctx, operation)
}

// ValidateKey reports whether key is a valid idempotency key
// ([wire.ValidateKey]: 1 to [wire.MaxKeyLen] characters of [A-Za-z0-9._:-]).
// It returns nil or an error wrapping [ErrInvalidKey] and
// [wire.ErrInvalidKey].
func ValidateKey(key string) error {
	if err := wire.ValidateKey(key); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalidKey, err)
	}
	return nil
}

// resolve returns the key (or ID) of a logical operation: the one stored
// for operation, else explicit, else a generated one, saving it before
// returning when a KeyStore and an operation name are set. With expires, a
// stored key older than the replay window is refused.
func (c *Client) resolve(ctx context.Context, operation, explicit string, expires bool, generate func() (string, error)) (string, error) {
	store := c.cfg.KeyStore
	if store == nil || operation == "" {
		if explicit != "" {
			return explicit, nil
		}
		return generate()
	}
	stored, err := store.Load(ctx, operation)
	switch {
	case err == nil:
		if explicit != "" && explicit != stored.Key {
			return "", fmt.Errorf("%w: operation %q is already bound to another key or ID; Forget it first", ErrInvalidRequest, operation)
		}
		if age := c.cfg.NowFunc().Sub(stored.SavedAt); expires && !stored.SavedAt.IsZero() && age >= c.cfg.ReplayWindow {
			return "", &KeyExpiredError{Operation: operation, Key: stored.Key, SavedAt: stored.SavedAt, Age: age, ReplayWindow: c.cfg.ReplayWindow}
		}
		return stored.Key, nil
	case !errors.Is(err, ErrKeyNotFound):
		return "", fmt.Errorf("client: key store: %w", err)
	}
	v := explicit
	if v == "" {
		if v, err = generate(); err != nil {
			return "", fmt.Errorf("client: generate key: %w", err)
		}
	}
	if err := store.Save(ctx, operation, StoredKey{Key: v, SavedAt: c.cfg.NowFunc()}); err != nil {
		return "", fmt.Errorf("client: key store: %w", err)
	}
	return v, nil
}

func (c *Client) requestHeader(extra http.Header, body []byte) http.Header {
	h := extra.Clone()
	if h == nil {
		h = http.Header{}
	}
	if len(body) > 0 && h.Get(wire.HeaderContentType) == "" {
		h.Set(wire.HeaderContentType, wire.ContentTypeJSON)
	}
	if h.Get("Accept") == "" {
		h.Set("Accept", "application/json, application/problem+json")
	}
	h.Set("User-Agent", c.cfg.UserAgent)
	return h
}

func (c *Client) currentToken() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.token
}

// refreshToken replaces the token after a 401 obtained with used. When
// another goroutine already replaced it, its token is kept and the hook is
// not called again.
func (c *Client) refreshToken(ctx context.Context, used string) error {
	if c.currentToken() != used {
		return nil
	}
	tok, err := c.cfg.RefreshTokenFunc(ctx)
	if err != nil {
		return fmt.Errorf("client: RefreshTokenFunc: %w", err)
	}
	c.mu.Lock()
	c.token = tok
	c.mu.Unlock()
	return nil
}

// attempt is one logical request, sent once per try.
type attempt struct {
	method  string
	url     string
	header  http.Header
	body    []byte
	id, key string
	log     slog.Attr

	// conditional marks a request with If-Match: a 412 after an attempt
	// that may have taken effect may be that attempt's own doing, so it
	// does not settle the outcome.
	conditional bool
	// goneIsDone marks a DELETE: a 404 or 410 after an attempt that may
	// have taken effect means the resource is gone, which is the goal.
	goneIsDone bool
}

// response is the outcome of one try: a response, or a transport error.
type response struct {
	status  int
	header  http.Header
	body    []byte
	problem *Problem
	err     error
	// sends is the number of times the request went out during this try:
	// more than 1 when net/http's transport silently re-sent it on a new
	// connection (it does so for a request with an Idempotency-Key, or a
	// GET, whose reused connection broke before any answer).
	sends int
}

func (r *response) code() string {
	if r.problem == nil {
		return ""
	}
	return string(r.problem.Code)
}

// do runs the retry loop of one logical operation.
func (c *Client) do(ctx context.Context, a *attempt) (*Result, error) {
	start := c.cfg.NowFunc()
	var (
		tries         int // tries made, capped by MaxAttempts
		attempts      int // requests sent, the transport's re-sends included
		retries       int
		mayHaveEffect bool // some attempt may have taken effect unseen
		justRefreshed bool // the last try followed a token refresh
		last          response
	)
	fail := func(outcomeKnown bool, cause error) error {
		return &Error{
			Method: a.method, URL: a.url,
			Status: last.status, Code: last.code(), Problem: last.problem,
			Header: last.header, Body: last.body,
			Attempts: attempts, OutcomeKnown: outcomeKnown,
			ID: a.id, Key: a.key, Err: cause,
		}
	}
	for {
		if err := ctx.Err(); err != nil {
			return nil, fail(attempts == 0 || !mayHaveEffect, err)
		}
		token := c.currentToken()
		tries++
		last = c.send(ctx, a, token, c.cfg.MaxElapsed-c.cfg.NowFunc().Sub(start))
		attempts += last.sends
		// A silent re-send means an earlier send broke unanswered.
		mayHaveEffect = mayHaveEffect || last.sends > 1
		if last.err != nil && ctx.Err() != nil {
			return nil, fail(false, ctx.Err())
		}
		if errors.Is(last.err, ErrResponseTooLarge) {
			return nil, fail(last.status/100 == 2 || isDefinitive(last.status), last.err)
		}
		hasRetryAfter := last.header != nil && last.header.Get(wire.HeaderRetryAfter) != ""
		decision := ClassifyAnswer(last.status, last.code(), hasRetryAfter, last.err)
		c.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "retrysafe client attempt",
			slog.String("method", a.method), slog.String("url", a.url), a.log,
			slog.Int("attempt", attempts), slog.Int("status", last.status),
			slog.String("code", last.code()), slog.String("decision", decision.String()),
			slog.Any("error", last.err))

		switch decision {
		case Done:
			return &Result{
				Status:   last.status,
				Replayed: strings.EqualFold(last.header.Get(wire.HeaderIdempotentReplayed), "true"),
				Header:   last.header,
				Body:     last.body,
				Location: last.header.Get(wire.HeaderLocation),
				ETag:     last.header.Get(wire.HeaderETag),
				Attempts: attempts,
			}, nil

		case Fail:
			if a.goneIsDone && mayHaveEffect && (last.status == http.StatusNotFound || last.status == http.StatusGone) {
				return &Result{Status: last.status, Header: last.header, Body: last.body, Attempts: attempts}, nil
			}
			known := isDefinitive(last.status) || (last.status >= 400 && last.status <= 499 && !mayHaveEffect)
			if a.conditional && mayHaveEffect && last.status == http.StatusPreconditionFailed {
				known = false
			}
			return nil, fail(known, last.err)

		case Refresh:
			if c.cfg.RefreshTokenFunc == nil || justRefreshed {
				return nil, fail(!mayHaveEffect, nil)
			}
			if tries >= c.cfg.MaxAttempts {
				return nil, fail(!mayHaveEffect, fmt.Errorf("%w: MaxAttempts (%d) reached", ErrRetriesExhausted, tries))
			}
			if err := c.refreshToken(ctx, token); err != nil {
				return nil, fail(!mayHaveEffect, err)
			}
			justRefreshed = true
			continue

		case Retry:
			justRefreshed = false
			mayHaveEffect = mayHaveEffect || mayHaveTakenEffect(last.status, last.err)
			exhausted := func(why string) error {
				if last.err != nil {
					return fmt.Errorf("%w: %s: %w", ErrRetriesExhausted, why, last.err)
				}
				return fmt.Errorf("%w: %s", ErrRetriesExhausted, why)
			}
			if tries >= c.cfg.MaxAttempts {
				return nil, fail(!mayHaveEffect, exhausted(fmt.Sprintf("MaxAttempts (%d) reached", tries)))
			}
			budget := c.cfg.MaxElapsed - c.cfg.NowFunc().Sub(start)
			ctxBound := false
			if dl, ok := ctx.Deadline(); ok {
				if left := time.Until(dl); left < budget {
					budget, ctxBound = left, true
				}
			}
			retryAfter, hasRetryAfter := time.Duration(0), false
			if last.header != nil {
				retryAfter, hasRetryAfter = parseRetryAfter(last.header.Get(wire.HeaderRetryAfter), c.cfg.NowFunc())
			}
			wait, ok := c.backoff.delay(retries, retryAfter, hasRetryAfter, budget)
			if !ok {
				if ctxBound {
					return nil, fail(!mayHaveEffect, fmt.Errorf("next retry would start after the context deadline: %w", context.DeadlineExceeded))
				}
				return nil, fail(!mayHaveEffect, exhausted(fmt.Sprintf("next retry would start after MaxElapsed (%v)", c.cfg.MaxElapsed)))
			}
			retries++
			if err := c.cfg.SleepFunc(ctx, wait); err != nil {
				return nil, fail(!mayHaveEffect, err)
			}
		}
	}
}

// send makes one try, bounded by AttemptTimeout and budget.
func (c *Client) send(ctx context.Context, a *attempt, token string, budget time.Duration) response {
	timeout := c.cfg.AttemptTimeout
	if budget > 0 && budget < timeout {
		timeout = budget
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var wrote atomic.Int32
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{WroteHeaders: func() { wrote.Add(1) }})
	sends := func() int { return max(1, int(wrote.Load())) }

	var body io.Reader
	if a.body != nil {
		body = bytes.NewReader(a.body)
	}
	req, err := http.NewRequestWithContext(ctx, a.method, a.url, body)
	if err != nil {
		return response{err: err, sends: 1}
	}
	req.Header = a.header.Clone()
	if token != "" {
		req.Header.Set(wire.HeaderAuthorization, "Bearer "+token)
	}
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return response{err: err, sends: sends()}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, c.cfg.MaxResponseBytes+1))
	r := response{status: resp.StatusCode, header: resp.Header, body: data, sends: sends()}
	switch {
	case err != nil:
		r.err = fmt.Errorf("client: read response body: %w", err)
	case int64(len(data)) > c.cfg.MaxResponseBytes:
		r.body = data[:c.cfg.MaxResponseBytes]
		r.err = fmt.Errorf("%w: over %d bytes", ErrResponseTooLarge, c.cfg.MaxResponseBytes)
	case resp.StatusCode/100 != 2:
		r.problem = parseProblem(resp.Header, data)
	}
	return r
}
