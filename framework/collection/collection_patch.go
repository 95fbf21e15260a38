package collection

import (
	"context"
	"encoding/json"
	"fmt"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/wire"
)

// The media types of a PATCH body ([wire.ContentTypeMergePatch],
// [wire.ContentTypeJSONPatch]).
const (
	// ContentTypeMergePatch is an RFC 7396 JSON merge patch: members to set,
	// null to remove an optional member, an array replaced whole.
	// application/json is read as a merge patch too.
	ContentTypeMergePatch = wire.ContentTypeMergePatch
	// ContentTypeJSONPatch is an RFC 6902 JSON Patch: a list of operations.
	// Its relative operations (add to an array's end, move) do not converge
	// on retry, so a PATCH in it needs an If-Match that names a version
	// (If-Match: * names none).
	ContentTypeJSONPatch = wire.ContentTypeJSONPatch
)

// PatchRequest is one PATCH of a resource.
type PatchRequest struct {
	Tenant string
	ID     uuid.UUID
	// ContentType is the patch's media type: [ContentTypeMergePatch] (also
	// application/json, or none) or [ContentTypeJSONPatch]. Another type
	// is 415 unsupported_media_type.
	ContentType string
	// Patch is the patch document as received.
	Patch []byte
	// Header carries If-Match and the resource's semantic headers.
	Header http.Header
}

// patchFormat is the kind of patch document a PATCH carries.
type patchFormat int

const (
	mergePatch patchFormat = iota
	jsonPatch
)

// parsePatchFormat reads a PATCH's Content-Type; a missing one is a merge
// patch, as a missing one is JSON for a PUT.
func parsePatchFormat(contentType string) (patchFormat, error) {
	if strings.TrimSpace(contentType) == "" {
		return mergePatch, nil
	}
	mt, _, err := mime.ParseMediaType(contentType)
	switch {
	case err != nil:
	case mt == ContentTypeMergePatch || mt == wire.ContentTypeJSON:
		return mergePatch, nil
	case mt == ContentTypeJSONPatch:
		return jsonPatch, nil
	}
	return 0, framework.Errorf(wire.CodeUnsupportedMediaType, "a PATCH body must be %s (or application/json) or %s, not %q",
		ContentTypeMergePatch, ContentTypeJSONPatch, contentType)
}

// Patch applies a patch to the resource and writes the result as a
// replace: the patch goes onto the command form of the current state
// ([Resource.CommandFunc]), the result is bound and validated exactly as a
// PUT body, and [decidePut] decides on its fingerprint, so the replace
// guard, If-Match (and its convergence when the result is already the
// current state), versions, ETags and [Resource.OnReplaceFunc] are the
// PUT's. A PATCH never creates: an unknown ID is 404 not_found, a deleted
// one 410, and If-None-Match: * on a live one 412. As for a PUT, the row is read first without a transaction: a
// result equal to the current state, or a refusal, is answered from that
// read and writes nothing. A change reads the row again under a row lock,
// applies the patch to what it holds and decides again, so concurrent
// PATCHes apply one after the other.
func (c *Collection[Cmd, Model]) Patch(ctx context.Context, req PatchRequest) (Result, error) {
	format, err := c.checkPatch(&req)
	if err != nil {
		return Result{}, err
	}
	cur, now, found, err := c.readPatched(ctx, c.engine.DB().Gorm, &req, false)
	if err != nil {
		return Result{}, c.engine.DB().Classify(err)
	}
	p, d, err := c.planPatch(&req, format, cur, now, found, false)
	if err != nil {
		return Result{}, err
	}
	if d.Action != actLock {
		res, err := c.patched(ctx, c.engine.DB().Gorm, p, d, cur)
		return res, c.engine.DB().Classify(err)
	}
	read := any(cur).(Row).SystemColumns().ETag()
	var res Result
	err = c.engine.DB().Write(ctx, func(tx *gorm.DB) error {
		cur, now, found, err := c.readPatched(ctx, tx, &req, true)
		if err != nil {
			return err
		}
		// The locked row is the one read (its ETag changes with every
		// write): the patch's result is the one planned; decide again,
		// under the lock.
		if found && any(cur).(Row).SystemColumns().ETag() == read {
			res, err = c.patched(ctx, tx, p, c.decide(p, true, cur, true, false), cur)
			return err
		}
		p, d, err := c.planPatch(&req, format, cur, now, found, true)
		if err != nil {
			return err
		}
		res, err = c.patched(ctx, tx, p, d, cur)
		return err
	})
	if err != nil {
		return Result{}, uniqueProblem(err)
	}
	return res, nil
}

// PatchTx is [Collection.Patch] inside the caller's transaction tx: the
// row is read under a row lock at once.
func (c *Collection[Cmd, Model]) PatchTx(ctx context.Context, tx *gorm.DB, req PatchRequest) (Result, error) {
	format, err := c.checkPatch(&req)
	if err != nil {
		return Result{}, err
	}
	return c.patchTx(ctx, tx, &req, format)
}

// checkPatch refuses what no state of the resource can make succeed: a
// create-only resource, another media type, a JSON Patch without an
// If-Match that names a version, a patch document that breaks the limits
// of a request body.
func (c *Collection[Cmd, Model]) checkPatch(req *PatchRequest) (patchFormat, error) {
	if c.res.Mode != CreateOrReplace {
		return 0, framework.Errorf(wire.CodeMethodNotAllowed, "%s resources are immutable", c.res.Singular)
	}
	if req.ID == uuid.Nil {
		return 0, framework.Errorf(wire.CodeInvalidResourceID, "the resource ID must be a non-nil UUID")
	}
	format, err := parsePatchFormat(req.ContentType)
	if err != nil {
		return 0, err
	}
	if format == jsonPatch && !namesVersion(req.Header.Get("If-Match")) {
		return 0, framework.Errorf(wire.CodePreconditionRequired,
			"a JSON Patch does not converge when it is retried: send it with If-Match naming the version it applies to (If-Match: * names none)")
	}
	if err := c.engine.Binder().CheckJSON(req.Patch); err != nil {
		return 0, err
	}
	return format, nil
}

// patchTx patches under the row lock.
func (c *Collection[Cmd, Model]) patchTx(ctx context.Context, tx *gorm.DB, req *PatchRequest, format patchFormat) (Result, error) {
	cur, now, found, err := c.readPatched(ctx, tx, req, true)
	if err != nil {
		return Result{}, err
	}
	p, d, err := c.planPatch(req, format, cur, now, found, true)
	if err != nil {
		return Result{}, err
	}
	return c.patched(ctx, tx, p, d, cur)
}

// readPatched reads the row a PATCH applies to, with its child rows and,
// when locked, under a row lock, and the database clock with it.
func (c *Collection[Cmd, Model]) readPatched(ctx context.Context, db *gorm.DB, req *PatchRequest, locked bool) (*Model, time.Time, bool, error) {
	cur := new(Model)
	var now time.Time
	found, err := c.read(ctx, db, store.RowReadParams{Key: c.key(req.Tenant, req.ID), Dest: cur, ForUpdate: locked, Preload: c.preload, Now: &now})
	return cur, now, found, err
}

// planPatch applies the patch to the command form of the row cur, binds the
// result as a PUT body and decides (as under a row lock when locked), on
// the database clock now of the read. p is nil when there is no live row
// to patch, or when If-None-Match: * is false on the live row (RFC 9110
// evaluates it before the patch is read); d then refuses.
func (c *Collection[Cmd, Model]) planPatch(req *PatchRequest, format patchFormat, cur *Model, now time.Time, found, locked bool) (*put[Model], putDecision, error) {
	noneMatchStar := strings.TrimSpace(req.Header.Get("If-None-Match")) == "*"
	if !found || any(cur).(Row).SystemColumns().DeletedAt != nil || noneMatchStar {
		return nil, c.decide(&put[Model]{state: putState{Patch: true, IfNoneMatchStar: noneMatchStar, DBNow: now}}, found, cur, locked, false), nil
	}
	doc, err := c.commandJSON(cur)
	if err != nil {
		return nil, putDecision{}, err
	}
	merged, err := applyPatch(format, doc, req.Patch, c.engine.Binder().MaxBodyBytes())
	if err != nil {
		return nil, putDecision{}, err
	}
	cmd, err := framework.Bind[Cmd](c.engine.Binder(), merged)
	if err != nil {
		return nil, putDecision{}, err
	}
	p, err := c.prepare(&PutRequest[Cmd]{Tenant: req.Tenant, ID: req.ID, Command: cmd, Header: req.Header})
	if err != nil {
		return nil, putDecision{}, err
	}
	p.state.Patch, p.state.DBNow = true, now
	return &p, c.decide(&p, true, cur, locked, false), nil
}

// patched carries out a PATCH's decision on the row cur it was made on.
func (c *Collection[Cmd, Model]) patched(ctx context.Context, db *gorm.DB, p *put[Model], d putDecision, cur *Model) (Result, error) {
	switch d.Action {
	case actRefuse:
		return Result{}, d.Err
	case actReply:
		return c.reply(ctx, db, p, d, cur)
	case actReplace:
		return c.replace(ctx, db, p, cur)
	}
	return Result{}, fmt.Errorf("collection: a PATCH was decided %d", d.Action)
}

// commandJSON is the command form of m, as JSON: what a PUT of its
// current state would carry.
func (c *Collection[Cmd, Model]) commandJSON(m *Model) ([]byte, error) {
	var cmd Cmd
	if c.res.CommandFunc != nil {
		cmd = c.res.CommandFunc(m)
	} else {
		rep, err := c.render(m)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(rep, &cmd); err != nil {
			return nil, err
		}
	}
	return json.Marshal(&cmd)
}

// applyPatch applies a checked patch document to doc with
// github.com/evanphx/json-patch. A JSON Patch that cannot be applied (a
// missing path, a failed test, an array index RFC 6901 forbids) is
// validation_failed; its copies may not grow the document beyond
// maxBytes.
func applyPatch(format patchFormat, doc, patch []byte, maxBytes int64) ([]byte, error) {
	if format == mergePatch {
		out, err := jsonpatch.MergePatch(doc, patch)
		if err != nil {
			return nil, &framework.Error{Code: wire.CodeMalformedJSON, Detail: "the merge patch cannot be read", Err: err}
		}
		return out, nil
	}
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, &framework.Error{Code: wire.CodeMalformedJSON, Detail: "the body is not a JSON Patch (a list of operations)", Err: err}
	}
	opts := jsonpatch.NewApplyOptions()
	opts.AccumulatedCopySizeLimit = maxBytes
	opts.SupportNegativeIndices = false
	if !hasIndexLikeTokens(ops) {
		out, err := ops.ApplyWithOptions(doc, opts)
		if err != nil {
			return nil, patchFailed(err.Error(), err)
		}
		return out, nil
	}
	// json-patch reads an index with strconv.Atoi, which takes 01 and +0:
	// each operation's pointers are checked against the document as that
	// operation finds it, then the operation is applied alone.
	for i, op := range ops {
		var cur any
		if err := json.Unmarshal(doc, &cur); err != nil {
			return nil, err
		}
		for _, field := range [...]string{"path", "from"} {
			if bad, ok := forbiddenIndex(cur, op, field); ok {
				return nil, patchFailed(fmt.Sprintf("operation %d: %s %q: an array index must be 0 or digits without a sign or leading zeros (RFC 6901)", i, field, bad), nil)
			}
		}
		out, err := jsonpatch.Patch{op}.ApplyWithOptions(doc, opts)
		if err != nil {
			return nil, patchFailed(err.Error(), err)
		}
		if op.Kind() == "copy" {
			opts.AccumulatedCopySizeLimit -= max(0, int64(len(out)-len(doc)))
			if opts.AccumulatedCopySizeLimit <= 0 {
				return nil, patchFailed("the copies of the JSON Patch grow the resource past the body limit", nil)
			}
		}
		doc = out
	}
	return doc, nil
}

// patchFailed is the validation_failed answer to a JSON Patch that cannot
// be applied to the resource.
func patchFailed(reason string, err error) error {
	return &framework.Error{Code: wire.CodeValidationFailed, Detail: "the JSON Patch cannot be applied to the resource",
		Fields: []wire.FieldError{{Field: "", Reason: reason}}, Err: err}
}

// indexLike reports whether tok is a token strconv.Atoi takes that RFC 6901
// does not spell as an array index (-1, 01, +0, 00): on an array it must
// be refused, on an object it is a member name like any other.
func indexLike(tok string) bool {
	if _, err := strconv.Atoi(tok); err != nil {
		return false
	}
	return tok != "0" && (tok[0] < '1' || tok[0] > '9')
}

// hasIndexLikeTokens reports whether a pointer of ops holds a token that
// [indexLike] reports.
func hasIndexLikeTokens(ops jsonpatch.Patch) bool {
	for _, op := range ops {
		for _, field := range [...]string{"path", "from"} {
			ptr, err := pointer(op, field)
			if err != nil {
				continue
			}
			for _, tok := range strings.Split(ptr, "/")[1:] {
				if indexLike(tok) {
					return true
				}
			}
		}
	}
	return false
}

// pointer is op's "path" or "from".
func pointer(op jsonpatch.Operation, field string) (string, error) {
	if field == "from" {
		return op.From()
	}
	return op.Path()
}

// forbiddenIndex walks op's pointer named field through doc and returns
// the first token that addresses an array in a spelling RFC 6901 forbids.
// A walk that leaves the document stops: applying the operation reports
// that.
func forbiddenIndex(doc any, op jsonpatch.Operation, field string) (string, bool) {
	ptr, err := pointer(op, field)
	if err != nil || ptr == "" {
		return "", false
	}
	cur := doc
	for _, tok := range strings.Split(ptr, "/")[1:] {
		tok = strings.NewReplacer("~1", "/", "~0", "~").Replace(tok)
		switch node := cur.(type) {
		case map[string]any:
			cur = node[tok]
		case []any:
			if indexLike(tok) {
				return tok, true
			}
			n, err := strconv.Atoi(tok)
			if err != nil || n < 0 || n >= len(node) {
				return "", false
			}
			cur = node[n]
		default:
			return "", false
		}
	}
	return "", false
}
