package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/client"
	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

const mergePatch = "application/merge-patch+json"

// patch sends PATCH path as tenant acme with the given Content-Type (none
// when ""); headers are name, value pairs.
func (e *env) patch(path, contentType string, body []byte, headers ...string) response {
	e.t.Helper()
	return e.raw(http.MethodPatch, path, contentType, body, headers...)
}

// replacedEvents counts the order.replaced events of an order.
func replacedEvents(t *testing.T, e *env, id uuid.UUID) int {
	t.Helper()
	return len(eventsWritten(t, e.app.DB.Gorm, "aggregate_type = 'order' AND aggregate_id = ? AND type = 'order.replaced'", id.String()))
}

// createOrder PUTs a new order of one item and returns its ID and ETag.
func createOrder(t *testing.T, e *env) (uuid.UUID, string) {
	t.Helper()
	id := uuid.New()
	r := e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(2, "10.00"))
	wantStatus(t, r, http.StatusCreated)
	return id, r.Header.Get("ETag")
}

// TestPatchOrders: the PATCH the framework derives for orders, DESIGN §5.1.
func TestPatchOrders(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id, etag := createOrder(t, e)
		path := orderPath(id)

		// A merge patch changes the members it names and keeps the rest.
		r := e.patch(path, mergePatch, []byte(`{"note":"ring twice"}`), "If-Match", etag)
		wantStatus(t, r, http.StatusOK)
		body := r.JSON(t)
		if body["note"] != "ring twice" || body["version"] != float64(2) || body["total"] != "20.00" ||
			r.Header.Get("ETag") == etag || r.Header.Get("Idempotent-Replayed") != "" {
			t.Fatalf("patched: %v %s", r.Header, r.Body)
		}
		// The replace is stamped by the database clock, like a PUT's.
		created, cerr := time.Parse(time.RFC3339Nano, body["created_at"].(string))
		updated, uerr := time.Parse(time.RFC3339Nano, body["updated_at"].(string))
		if cerr != nil || uerr != nil || updated.Before(created) || updated.Sub(created) > time.Hour {
			t.Fatalf("patched order's times: created_at %v, updated_at %v", body["created_at"], body["updated_at"])
		}
		if c := e.orderColumns("acme", id); c.Note != "ring twice" || c.TotalCents != 2000 || len(c.Items) != 1 {
			t.Fatalf("typed columns after the patch: %+v", c)
		}
		if n := replacedEvents(t, e, id); n != 1 {
			t.Fatalf("%d order.replaced events, want 1", n)
		}

		// A patch whose result is the current state writes nothing and
		// emits nothing; so does application/json, a merge patch too.
		for _, ct := range []string{mergePatch, "application/json", ""} {
			same := e.patch(path, ct, []byte(`{"note":"ring twice","items":[{"sku":"sku_1","quantity":2,"unit_price":"10.0"}]}`))
			wantStatus(t, same, http.StatusOK)
			if !bytes.Equal(same.Body, r.Body) || same.Header.Get("ETag") != r.Header.Get("ETag") {
				t.Fatalf("no-op patch (%q) answered %s, want %s", ct, same.Body, r.Body)
			}
		}
		if v := e.order("acme", id).Version; v != 2 || replacedEvents(t, e, id) != 1 {
			t.Fatalf("a no-op patch wrote: version %d, %d events", v, replacedEvents(t, e, id))
		}

		// null removes an optional member; an array is replaced whole.
		r = e.patch(path, mergePatch, []byte(`{"note":null,"items":[{"sku":"sku_9","quantity":1,"unit_price":"1.5"}]}`))
		wantStatus(t, r, http.StatusOK)
		if c := e.orderColumns("acme", id); c.Note != "" || c.TotalCents != 150 || len(c.Items) != 1 || c.Items[0].SKU != "sku_9" {
			t.Fatalf("typed columns after null and a new array: %+v", c)
		}
		if _, ok := r.JSON(t)["note"]; ok {
			t.Fatalf("the removed note is still there: %s", r.Body)
		}
		current := r.Header.Get("ETag")

		// Refusals store nothing.
		refusals := []struct {
			name        string
			contentType string
			body        string
			headers     []string
			status      int
			code        string
		}{
			{"unknown member", mergePatch, `{"colour":"red"}`, nil, http.StatusBadRequest, "validation_failed"},
			{"invalid result", mergePatch, `{"items":[]}`, nil, http.StatusBadRequest, "validation_failed"},
			{"required member removed", mergePatch, `{"customer":null}`, nil, http.StatusBadRequest, "validation_failed"},
			{"duplicate keys", mergePatch, `{"note":"a","note":"b"}`, nil, http.StatusBadRequest, "malformed_json"},
			{"overlong number", mergePatch, `{"items":[{"sku":"s","quantity":` + strings.Repeat("1", 80) + `,"unit_price":"1"}]}`, nil,
				http.StatusBadRequest, "validation_failed"},
			{"NUL", mergePatch, `{"note":"a\u0000b"}`, nil, http.StatusBadRequest, "validation_failed"},
			{"too deep", mergePatch, strings.Repeat(`{"a":`, 40) + `1` + strings.Repeat(`}`, 40), nil, http.StatusBadRequest, "malformed_json"},
			{"stale If-Match, another result", mergePatch, `{"note":"x"}`, []string{"If-Match", etag}, http.StatusPreconditionFailed, "precondition_failed"},
			{"JSON Patch without If-Match", "application/json-patch+json", `[{"op":"replace","path":"/note","value":"x"}]`, nil,
				http.StatusPreconditionRequired, "precondition_required"},
			{"JSON Patch that does not apply", "application/json-patch+json", `[{"op":"remove","path":"/nothing"}]`,
				[]string{"If-Match", current}, http.StatusBadRequest, "validation_failed"},
			{"another media type", "text/plain", `{"note":"x"}`, nil, http.StatusUnsupportedMediaType, "unsupported_media_type"},
			{"another JSON media type", "application/vnd.example+json", `{"note":"x"}`, nil, http.StatusUnsupportedMediaType, "unsupported_media_type"},
		}
		for _, tc := range refusals {
			r := e.patch(path, tc.contentType, []byte(tc.body), tc.headers...)
			if r.Status != tc.status || r.Code(t) != tc.code {
				t.Fatalf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
			}
		}
		if v := e.order("acme", id).Version; v != 3 || replacedEvents(t, e, id) != 2 {
			t.Fatalf("a refused patch wrote: version %d, %d events", v, replacedEvents(t, e, id))
		}

		// A JSON Patch with If-Match applies its operations in order.
		r = e.patch(path, "application/json-patch+json",
			[]byte(`[{"op":"add","path":"/items/-","value":{"sku":"sku_2","quantity":3,"unit_price":"2"}},{"op":"add","path":"/note","value":"jp"}]`),
			"If-Match", current)
		wantStatus(t, r, http.StatusOK)
		if c := e.orderColumns("acme", id); c.Note != "jp" || c.TotalCents != 750 || len(c.Items) != 2 {
			t.Fatalf("typed columns after the JSON Patch: %+v", c)
		}

		// A PATCH never creates; it does not reach another tenant's order,
		// a deleted one or a submitted one.
		unknown := uuid.New()
		wantCode(t, e.patch(orderPath(unknown), mergePatch, []byte(`{"note":"x"}`)), http.StatusNotFound, "not_found")
		wantCode(t, e.patch(path, mergePatch, []byte(`{"note":"x"}`), "Authorization", "Bearer "+tokenGlobex), http.StatusNotFound, "not_found")
		if n := e.count("orders", "id = ?", unknown.String()); n != 0 {
			t.Fatalf("a PATCH of an unknown ID stored %d rows", n)
		}
		gone, _ := createOrder(t, e)
		wantStatus(t, e.do(http.MethodDelete, orderPath(gone), tokenAcme, nil), http.StatusNoContent)
		wantCode(t, e.patch(orderPath(gone), mergePatch, []byte(`{"note":"x"}`)), http.StatusGone, "resource_deleted")
		wantStatus(t, e.do(http.MethodPost, path+"/submit", tokenAcme, nil), http.StatusOK)
		wantCode(t, e.patch(path, mergePatch, []byte(`{"note":"late"}`)), http.StatusConflict, "resource_locked")
		if c := e.orderColumns("acme", id); c.Note != "jp" {
			t.Fatalf("a submitted order was patched: %+v", c)
		}
		// …but a patch it already satisfies is answered, not refused.
		wantStatus(t, e.patch(path, mergePatch, []byte(`{"note":"jp"}`)), http.StatusOK)
	})
}

// TestPatchPreconditions: the conditional headers of a PATCH (RFC 9110
// §13.1). A JSON Patch needs an If-Match naming a version: If-Match: *
// names none, so a relative patch (add to the end of the items) sent with
// it twice would add twice; it is 428 like a missing If-Match. A PATCH
// never creates, so If-None-Match: * is false on an existing resource:
// 412, even when the patch is already satisfied. Neither writes anything:
// the version, the items and the order.replaced events stay as they were.
func TestPatchPreconditions(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id, etag := createOrder(t, e)
		path := orderPath(id)
		appendItem := []byte(`[{"op":"add","path":"/items/-","value":{"sku":"sku_2","quantity":1,"unit_price":"1"}}]`)
		const jsonPatch = "application/json-patch+json"

		for _, tc := range []struct {
			name, contentType string
			body              []byte
			headers           []string
			status            int
			code              string
		}{
			{"JSON Patch, If-Match: *", jsonPatch, appendItem, []string{"If-Match", "*"}, http.StatusPreconditionRequired, "precondition_required"},
			{"JSON Patch, If-Match: * again", jsonPatch, appendItem, []string{"If-Match", " * "}, http.StatusPreconditionRequired, "precondition_required"},
			{"JSON Patch, empty If-Match", jsonPatch, appendItem, []string{"If-Match", ""}, http.StatusPreconditionRequired, "precondition_required"},
			{"merge patch, If-None-Match: *", mergePatch, []byte(`{"note":"x"}`), []string{"If-None-Match", "*"},
				http.StatusPreconditionFailed, "precondition_failed"},
			{"merge patch already satisfied, If-None-Match: *", mergePatch, []byte(`{"note":"n"}`), []string{"If-None-Match", "*"},
				http.StatusPreconditionFailed, "precondition_failed"},
			{"JSON Patch, current If-Match and If-None-Match: *", jsonPatch, appendItem, []string{"If-Match", etag, "If-None-Match", "*"},
				http.StatusPreconditionFailed, "precondition_failed"},
			{"invalid merge patch, If-None-Match: *", mergePatch, []byte(`{"items":[]}`), []string{"If-None-Match", "*"},
				http.StatusPreconditionFailed, "precondition_failed"},
		} {
			r := e.patch(path, tc.contentType, tc.body, tc.headers...)
			if r.Status != tc.status || r.Code(t) != tc.code {
				t.Fatalf("%s: %d %s, want %d %s", tc.name, r.Status, r.Body, tc.status, tc.code)
			}
		}
		if v := e.order("acme", id).Version; v != 1 || replacedEvents(t, e, id) != 0 {
			t.Fatalf("a refused PATCH wrote: version %d, %d order.replaced events", v, replacedEvents(t, e, id))
		}
		e.wantOneItem("acme", id, 2, 1000)

		// If-None-Match: * holds where there is no resource: the PATCH goes
		// on and is refused for that (404, 410), and creates nothing.
		unknown := uuid.New()
		wantCode(t, e.patch(orderPath(unknown), mergePatch, []byte(`{"note":"x"}`), "If-None-Match", "*"), http.StatusNotFound, "not_found")
		if n := e.count("orders", "id = ?", unknown.String()); n != 0 {
			t.Fatalf("a PATCH with If-None-Match: * created %d rows", n)
		}
		gone, _ := createOrder(t, e)
		wantStatus(t, e.do(http.MethodDelete, orderPath(gone), tokenAcme, nil), http.StatusNoContent)
		wantCode(t, e.patch(orderPath(gone), mergePatch, []byte(`{"note":"x"}`), "If-None-Match", "*"), http.StatusGone, "resource_deleted")

		// With the ETag, the same JSON Patch applies once; its retry with
		// that ETag, now stale, is 412 and adds nothing more.
		wantStatus(t, e.patch(path, jsonPatch, appendItem, "If-Match", etag), http.StatusOK)
		wantCode(t, e.patch(path, jsonPatch, appendItem, "If-Match", etag), http.StatusPreconditionFailed, "precondition_failed")
		if c := e.orderColumns("acme", id); len(c.Items) != 2 || e.order("acme", id).Version != 2 || replacedEvents(t, e, id) != 1 {
			t.Fatalf("after one JSON Patch and its retry: %d items, version %d, %d events", len(c.Items), e.order("acme", id).Version, replacedEvents(t, e, id))
		}
	})
}

// TestPatchArrayIndexesRFC6901: a JSON Patch path addresses an array
// element as RFC 6901 spells an index (0, or digits without a sign or
// leading zeros; "-" past the end for add). -1, 01, +0 and -0 are 400 and
// change nothing, however the patch library would have read them (-1 as
// the last element, 01 as 1).
func TestPatchArrayIndexesRFC6901(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id, etag := createOrder(t, e)
		path := orderPath(id)
		const jsonPatch = "application/json-patch+json"
		for _, patch := range []string{
			`[{"op":"remove","path":"/items/-1"}]`,
			`[{"op":"replace","path":"/items/-1/quantity","value":5}]`,
			`[{"op":"replace","path":"/items/00/quantity","value":5}]`,
			`[{"op":"add","path":"/items/+0","value":{"sku":"sku_2","quantity":1,"unit_price":"1"}}]`,
			`[{"op":"add","path":"/items/01","value":{"sku":"sku_2","quantity":1,"unit_price":"1"}}]`,
			`[{"op":"copy","from":"/items/-0","path":"/items/-"}]`,
			`[{"op":"add","path":"/items/-","value":{"sku":"sku_2","quantity":1,"unit_price":"1"}},{"op":"remove","path":"/items/01"}]`,
		} {
			r := e.patch(path, jsonPatch, []byte(patch), "If-Match", etag)
			wantCode(t, r, http.StatusBadRequest, "validation_failed")
		}
		if v := e.order("acme", id).Version; v != 1 || replacedEvents(t, e, id) != 0 {
			t.Fatalf("a refused JSON Patch wrote: version %d, %d order.replaced events", v, replacedEvents(t, e, id))
		}
		e.wantOneItem("acme", id, 2, 1000)

		r := e.patch(path, jsonPatch, []byte(`[{"op":"replace","path":"/items/0/quantity","value":3}]`), "If-Match", etag)
		wantStatus(t, r, http.StatusOK)
		e.wantOneItem("acme", id, 3, 1000)
	})
}

func wantCode(t *testing.T, r response, status int, code string) {
	t.Helper()
	if r.Status != status || r.Code(t) != code {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
}

// TestConditionalWriteLostAnswerConverges: a proxy between the Go client
// and the API drops the answer of the first PUT + If-Match and of the
// first PATCH + If-Match after the server committed. The client's retry
// carries the same If-Match, now stale, and converges: 200 with the
// current representation, the version moved exactly once per write, one
// order.replaced event per write.
func TestConditionalWriteLostAnswerConverges(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		var mu sync.Mutex
		dropped := map[string]bool{}
		drop := func(req *http.Request, _ []byte) bool {
			mu.Lock()
			defer mu.Unlock()
			if req.Method == http.MethodGet || dropped[req.Method] {
				return false
			}
			dropped[req.Method] = true
			return true
		}
		u, err := url.Parse(e.srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		proxy, err := retrysafetest.StartProxy(u.Host, retrysafetest.ProxyConfig{DropAnswerFunc: drop})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(proxy.Close)
		c, err := client.New("http://"+proxy.Addr(), &client.Config{
			HTTPClient: &http.Client{Transport: &http.Transport{DisableKeepAlives: true}},
			Token:      tokenAcme,
			SleepFunc:  func(ctx context.Context, _ time.Duration) error { return ctx.Err() },
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := t.Context()
		id, etag := createOrder(t, e)

		put, err := c.Replace(ctx, client.ReplaceRequest{Collection: "/v1/orders", ID: id, IfMatch: etag, Body: orderBody(3, "10.00")})
		if err != nil {
			t.Fatalf("Replace: %v", err)
		}
		if put.Status != http.StatusOK || put.Attempts != 2 || !put.Replayed || !bytes.Contains(put.Body, []byte(`"version":2`)) {
			t.Fatalf("Replace after a lost answer: %d, %d attempts, replayed %t, %s", put.Status, put.Attempts, put.Replayed, put.Body)
		}
		if v := e.order("acme", id).Version; v != 2 || replacedEvents(t, e, id) != 1 {
			t.Fatalf("after the PUT: version %d, %d order.replaced events; want 2 and 1", v, replacedEvents(t, e, id))
		}

		patched, err := c.Patch(ctx, orderPath(id), []byte(`{"note":"patched"}`), put.ETag)
		if err != nil {
			t.Fatalf("Patch: %v", err)
		}
		if patched.Status != http.StatusOK || patched.Attempts != 2 || !patched.Replayed || !bytes.Contains(patched.Body, []byte(`"version":3`)) {
			t.Fatalf("Patch after a lost answer: %d, %d attempts, replayed %t, %s", patched.Status, patched.Attempts, patched.Replayed, patched.Body)
		}
		if v := e.order("acme", id).Version; v != 3 || replacedEvents(t, e, id) != 2 {
			t.Fatalf("after the PATCH: version %d, %d order.replaced events; want 3 and 2", v, replacedEvents(t, e, id))
		}
		if col := e.orderColumns("acme", id); col.Note != "patched" || col.TotalCents != 3000 {
			t.Fatalf("typed columns: %+v", col)
		}
		if !dropped[http.MethodPut] || !dropped[http.MethodPatch] {
			t.Fatalf("the proxy dropped %v", dropped)
		}
	})
}

// TestPatchConcurrentSameIfMatch: 20 PATCHes of one order race with the
// same If-Match, half of them with the same patch. Exactly one writes; the
// others get 412 or, when their result is what the winner wrote, converge.
func TestPatchConcurrentSameIfMatch(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, patient)
		id, etag := createOrder(t, e)
		const n = 20
		answers := make([]response, n)
		var wg sync.WaitGroup
		for i := range n {
			note := "same"
			if i%2 == 1 {
				note = "mine " + string(rune('a'+i))
			}
			wg.Go(func() {
				answers[i] = e.patch(orderPath(id), mergePatch, []byte(`{"note":"`+note+`"}`), "If-Match", etag)
			})
		}
		wg.Wait()
		writes, converged, refused := 0, 0, 0
		for i, r := range answers {
			switch {
			case r.Status == http.StatusOK && r.Header.Get("Idempotent-Replayed") == "":
				writes++
			case r.Status == http.StatusOK:
				converged++
				if i%2 == 1 {
					t.Fatalf("patch %d converged on another patch's result: %s", i, r.Body)
				}
			case r.Status == http.StatusPreconditionFailed:
				refused++
			default:
				t.Fatalf("patch %d: %d %s", i, r.Status, r.Body)
			}
		}
		if writes != 1 {
			t.Fatalf("%d patches wrote, want 1 (%d converged, %d refused)", writes, converged, refused)
		}
		if v := e.order("acme", id).Version; v != 1+int64(writes) || replacedEvents(t, e, id) != writes {
			t.Fatalf("version %d, %d order.replaced events; want %d and %d", v, replacedEvents(t, e, id), 1+writes, writes)
		}
		var rep struct{ Note string }
		if err := json.Unmarshal(e.do(http.MethodGet, orderPath(id), tokenAcme, nil).Body, &rep); err != nil {
			t.Fatal(err)
		}
		if rep.Note == "same" && converged != n/2-1 || rep.Note != "same" && converged != 0 {
			t.Fatalf("note %q, %d converged", rep.Note, converged)
		}
		t.Logf("20 racing PATCHes: 1 write, %d converged, %d refused with 412", converged, refused)
	})
}
