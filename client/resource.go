package client

import (
	"context"
	"encoding/json"
	"fmt"
	"iter"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/google/uuid"
	"github.com/retrysafe/retrysafe/wire"
)

// Get reads one resource: GET {base}{path} (for example
// "/v1/orders/0190…"; a query string is kept), retried per [Classify]. A
// 200 is the Result; any other answer is an [*Error] (404 not_found for a
// missing resource or one of another tenant).
func (c *Client) Get(ctx context.Context, path string) (*Result, error) {
	if strings.TrimSpace(path) == "" {
		return nil, fmt.Errorf("%w: Get: empty path", ErrInvalidRequest)
	}
	p, query, _ := strings.Cut(path, "?")
	u := c.base.JoinPath(p)
	u.RawQuery = query
	return c.do(ctx, &attempt{
		method: http.MethodGet,
		url:    u.String(),
		header: c.requestHeader(nil, nil),
		log:    slog.String("path", p),
	})
}

// ListRequest is a walk over a collection: GET {base}{Path}?{Query}&limit=
// {Limit}&cursor=…, page after page.
type ListRequest struct {
	// Path is the collection path, for example "/v1/orders". Required.
	Path string

	// Query holds the filters, for example status=draft. Defaults to none.
	Query url.Values

	// Limit is the page size sent as limit. Defaults to 0: the server's
	// default page size.
	Limit int
}

// List returns the items of a collection, following next_cursor from page
// to page until a page has none. Each page is one [Client.Get], retried on
// its own. The iteration stops at the first error, which it yields with a
// nil item; a server that sends the same cursor twice is an error, never a
// loop.
//
//	for item, err := range c.List(ctx, client.ListRequest{Path: "/v1/orders"}) {
//		if err != nil { … }
//		…
//	}
func (c *Client) List(ctx context.Context, req ListRequest) iter.Seq2[json.RawMessage, error] {
	return func(yield func(json.RawMessage, error) bool) {
		if strings.TrimSpace(req.Path) == "" {
			yield(nil, fmt.Errorf("%w: List: empty Path", ErrInvalidRequest))
			return
		}
		seen := map[string]bool{}
		cursor := ""
		for {
			q := url.Values{}
			for k, v := range req.Query {
				q[k] = append([]string(nil), v...)
			}
			if req.Limit > 0 {
				q.Set("limit", strconv.Itoa(req.Limit))
			}
			if cursor != "" {
				q.Set("cursor", cursor)
			}
			path := req.Path
			if len(q) > 0 {
				path += "?" + q.Encode()
			}
			res, err := c.Get(ctx, path)
			if err != nil {
				yield(nil, err)
				return
			}
			var page struct {
				Items      []json.RawMessage `json:"items"`
				NextCursor *string           `json:"next_cursor"`
			}
			if err := json.Unmarshal(res.Body, &page); err != nil {
				yield(nil, fmt.Errorf("client: List %s: the page is not {\"items\":[…]}: %w", req.Path, err))
				return
			}
			for _, item := range page.Items {
				if !yield(item, nil) {
					return
				}
			}
			if page.NextCursor == nil || *page.NextCursor == "" {
				return
			}
			cursor = *page.NextCursor
			if seen[cursor] {
				yield(nil, fmt.Errorf("client: List %s: the server sent cursor %q twice", req.Path, cursor))
				return
			}
			seen[cursor] = true
		}
	}
}

// ReplaceRequest replaces a resource through the PUT pattern:
// PUT {base}{Collection}/{ID} with If-Match.
type ReplaceRequest struct {
	// Collection is the collection path, for example "/v1/orders".
	// Required.
	Collection string

	// ID is the resource's ID. Required.
	ID uuid.UUID

	// IfMatch is the ETag the replace is based on (from a Get or the
	// Result of a Create); the server answers 412 precondition_failed when
	// the resource changed since. Defaults to "": an unconditional
	// replace, where the last writer wins.
	IfMatch string

	// Body is the JSON representation to send, kept and re-sent unchanged
	// on every attempt.
	Body []byte

	// Value, when Body is nil, is marshalled once with encoding/json and
	// sent as the body. Defaults to nil.
	Value any

	// Header holds extra headers sent on every attempt.
	Header http.Header
}

// Replace sends PUT {Collection}/{ID} with If-Match, retried per
// [Classify]: the same body again is a replay on the server, so a retry
// after a lost answer does not bump the version twice. A 200 (or 201) is
// the Result.
//
// When an attempt's answer was lost after the replace was applied, the
// retry's If-Match is stale, but its body is the current state: the
// server converges (200, the current representation, Idempotent-Replayed:
// true) instead of answering 412. A 412 after a lost answer therefore
// means that the resource holds something else now (another writer came
// in between, which may or may not have been after this replace): Replace
// returns an [*Error] with Status 412 and OutcomeKnown false. Get the
// resource and compare before trying again.
func (c *Client) Replace(ctx context.Context, req ReplaceRequest) (*Result, error) {
	if strings.TrimSpace(req.Collection) == "" || req.ID == uuid.Nil {
		return nil, fmt.Errorf("%w: Replace needs a Collection and a non-nil ID", ErrInvalidRequest)
	}
	body, err := marshalBody(req.Body, req.Value)
	if err != nil {
		return nil, err
	}
	h := c.requestHeader(req.Header, body)
	if req.IfMatch != "" {
		h.Set(wire.HeaderIfMatch, req.IfMatch)
	}
	res, err := c.do(ctx, &attempt{
		method:      http.MethodPut,
		url:         c.base.JoinPath(req.Collection, req.ID.String()).String(),
		header:      h,
		body:        body,
		id:          req.ID.String(),
		log:         slog.String("id", req.ID.String()),
		conditional: req.IfMatch != "",
	})
	if err != nil {
		return nil, err
	}
	res.ID = req.ID
	return res, nil
}

// Patch sends PATCH {base}{path} with patch as an RFC 7396 merge patch
// (application/merge-patch+json), with If-Match when ifMatch is not "",
// retried per [Classify]. A 200 is the Result.
//
// A merge patch converges: applied again to its own result it changes
// nothing, so the server answers the retry of an attempt whose answer was
// lost with 200 and the current representation (Idempotent-Replayed:
// true), also when ifMatch went stale because that attempt was applied.
// Without ifMatch the last writer wins, as for Replace. A 412 after a lost
// answer means that another write changed the resource since; the Error
// then has OutcomeKnown false, as for Replace. A patch never creates: an
// unknown path is a 404 [*Error].
func (c *Client) Patch(ctx context.Context, path string, patch []byte, ifMatch string) (*Result, error) {
	if strings.TrimSpace(path) == "" || len(patch) == 0 {
		return nil, fmt.Errorf("%w: Patch needs a path and a patch", ErrInvalidRequest)
	}
	h := c.requestHeader(http.Header{wire.HeaderContentType: {wire.ContentTypeMergePatch}}, patch)
	if ifMatch != "" {
		h.Set(wire.HeaderIfMatch, ifMatch)
	}
	return c.do(ctx, &attempt{
		method:      http.MethodPatch,
		url:         c.base.JoinPath(path).String(),
		header:      h,
		body:        patch,
		log:         slog.String("path", path),
		conditional: ifMatch != "",
	})
}

// Delete sends DELETE {base}{path}, with If-Match when ifMatch is not "",
// retried per [Classify]. A 204 is the Result. So is a 404 or 410 that
// follows an attempt whose answer was lost: the resource is gone, which is
// what was asked (Result.Status tells which answer came). A 404 on the
// first answer is an [*Error].
func (c *Client) Delete(ctx context.Context, path, ifMatch string) (*Result, error) {
	if strings.TrimSpace(path) == "" {
		return nil, fmt.Errorf("%w: Delete: empty path", ErrInvalidRequest)
	}
	h := c.requestHeader(nil, nil)
	if ifMatch != "" {
		h.Set(wire.HeaderIfMatch, ifMatch)
	}
	return c.do(ctx, &attempt{
		method:      http.MethodDelete,
		url:         c.base.JoinPath(path).String(),
		header:      h,
		log:         slog.String("path", path),
		conditional: ifMatch != "",
		goneIsDone:  true,
	})
}
