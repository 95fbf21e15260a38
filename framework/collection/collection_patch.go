package collection

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework"

	jsonpatch "github.com/evanphx/json-patch/v5"
	"github.com/go-json-experiment/json/jsontext"
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
	return 0, framework.Errorf(framework.CodeUnsupportedMediaType, "a PATCH body must be %s (or application/json) or %s, not %q",
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
		return 0, framework.Errorf(framework.CodeMethodNotAllowed, "%s resources are immutable", c.res.Singular)
	}
	if req.ID == uuid.Nil {
		return 0, framework.Errorf(framework.CodeInvalidResourceID, "the resource ID must be a non-nil UUID")
	}
	format, err := parsePatchFormat(req.ContentType)
	if err != nil {
		return 0, err
	}
	if format == jsonPatch && !namesVersion(req.Header.Get("If-Match")) {
		return 0, framework.Errorf(framework.CodePreconditionRequired,
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
	found, err := c.rows.Read(ctx, db, ReadRowParams{Key: c.key(req.Tenant, req.ID), Dest: cur, ForUpdate: locked, Preload: c.preloads(), Now: &now})
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
			return nil, &framework.Error{Code: framework.CodeMalformedJSON, Detail: "the merge patch cannot be read", Err: err}
		}
		return out, nil
	}
	ops, err := jsonpatch.DecodePatch(patch)
	if err != nil {
		return nil, &framework.Error{Code: framework.CodeMalformedJSON, Detail: "the body is not a JSON Patch (a list of operations)", Err: err}
	}
	aliased, err := aliasIndexLikeNames(ops)
	if err == nil && aliased {
		doc, err = renameMembers(doc, toAlias)
	}
	if err != nil {
		return nil, &framework.Error{Code: framework.CodeMalformedJSON, Detail: "the body is not a JSON Patch (a list of operations)", Err: err}
	}
	opts := jsonpatch.NewApplyOptions()
	opts.AccumulatedCopySizeLimit = maxBytes
	opts.SupportNegativeIndices = false
	out, err := ops.ApplyWithOptions(doc, opts)
	if err != nil {
		// The reason speaks of the tokens as sent, not of their aliases.
		reason := strings.NewReplacer(aliasMark, "", `\x00`, "").Replace(err.Error())
		if aliased && errors.Is(err, strconv.ErrSyntax) {
			reason = "an array index must be 0 or a number without a sign or leading zeros (RFC 6901): " + reason
		}
		return nil, &framework.Error{Code: framework.CodeValidationFailed, Detail: "the JSON Patch cannot be applied to the resource",
			Fields: []framework.FieldError{{Field: "", Reason: reason}}, Err: err}
	}
	if aliased {
		return renameMembers(out, fromAlias)
	}
	return out, nil
}

// aliasMark starts the alias of a member name that json-patch would read
// as an array index. Its NUL can be in no member name of a document or a
// patch: Bind and CheckJSON refuse it.
const aliasMark = "\x00"

// aliasIndexLikeNames rewrites the paths of ops so that json-patch reads
// every token RFC 6901 forbids as an array index (-1, 01, +0: what
// strconv.Atoi takes but is not 0 or a number without a sign or leading
// zeros) as a member name, never as an index: the token becomes its
// alias, aliasMark + token, which no array index parses as, so on an
// array it fails, and on an object it names the member whose name is
// aliased the same way in the document (renameMembers) and in the
// operations' values, here. It reports whether it aliased anything; the
// caller then renames the document's members and, after the patch, back.
func aliasIndexLikeNames(ops jsonpatch.Patch) (bool, error) {
	aliased := false
	for _, op := range ops {
		for _, field := range []string{"path", "from"} {
			raw := op[field]
			if raw == nil {
				continue
			}
			var ptr string
			if err := json.Unmarshal(*raw, &ptr); err != nil {
				return false, err
			}
			tokens := strings.Split(ptr, "/")
			changed := false
			for i, tok := range tokens {
				if name, ok := toAlias(tok); ok && i > 0 {
					tokens[i], changed = name, true
				}
			}
			if !changed {
				continue
			}
			b, err := json.Marshal(strings.Join(tokens, "/"))
			if err != nil {
				return false, err
			}
			*raw, aliased = b, true
		}
	}
	if !aliased {
		return false, nil
	}
	for _, op := range ops {
		if raw := op["value"]; raw != nil {
			b, err := renameMembers(*raw, toAlias)
			if err != nil {
				return false, err
			}
			*raw = b
		}
	}
	return true, nil
}

// toAlias is the alias of a member name json-patch would take for an
// array index that RFC 6901 forbids.
func toAlias(name string) (string, bool) {
	digits := strings.TrimLeft(name, "+-")
	if digits == "" || len(name)-len(digits) > 1 || strings.Trim(digits, "0123456789") != "" {
		return "", false
	}
	if name == digits && (name == "0" || name[0] != '0') {
		return "", false // an index as RFC 6901 spells it
	}
	return aliasMark + name, true
}

// fromAlias is the member name of an alias.
func fromAlias(name string) (string, bool) { return strings.CutPrefix(name, aliasMark) }

// renameMembers rewrites the JSON document doc with every object member
// whose name rename maps renamed, at any depth; everything else is kept.
func renameMembers(doc []byte, rename func(string) (string, bool)) ([]byte, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(doc))
	var out bytes.Buffer
	enc := jsontext.NewEncoder(&out)
	for {
		tok, err := dec.ReadToken()
		if errors.Is(err, io.EOF) {
			return out.Bytes(), nil
		}
		if err != nil {
			return nil, err
		}
		// A string read as the odd token of an object is a member name.
		if kind, n := dec.StackIndex(dec.StackDepth()); tok.Kind() == '"' && kind == '{' && n%2 == 1 {
			if name, ok := rename(tok.String()); ok {
				tok = jsontext.String(name)
			}
		}
		if err := enc.WriteToken(tok); err != nil {
			return nil, err
		}
	}
}
