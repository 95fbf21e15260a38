package collection_test

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestNULIsRefusedAndNothingStored: a NUL in any text of a PUT or legacy
// POST body, however it is spelled, is 400 validation_failed naming the
// field, and nothing is stored: no row, no child row, no event. Text that
// only looks like a NUL escape (a backslash, then u0000) is stored as
// written. The request front's one JSON check (framework.Bind) is what
// refuses it; the collection checks nothing of its own.
func TestNULIsRefusedAndNothingStored(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn)
		legacy := h.legacy()
		for _, tc := range []struct{ body, field string }{
			{`{"customer":"x\u0000","lines":[{"text":"a","amount":1}]}`, "customer"},
			{`{"customer":"\\\u0000","lines":[{"text":"a","amount":1}]}`, "customer"},
			{`{"customer":"\u00000","lines":[{"text":"a","amount":1}]}`, "customer"},
			{`{"customer":"c","lines":[{"text":"a","amount":1},{"text":"b\u0000c","amount":2}]}`, "lines[1].text"},
			{`{"customer":"c","lines":[{"text":"a","amount":1}],"n\u0000te":"x"}`, `n\u0000te`},
		} {
			id := uuid.New()
			r := h.do("PUT", invoicePath(id), "tok1", []byte(tc.body))
			if r.Status != http.StatusBadRequest || r.code(t) != "validation_failed" || !namesField(t, r, tc.field) {
				t.Fatalf("PUT %s: %d %s, want 400 validation_failed on %s", tc.body, r.Status, r.Body, tc.field)
			}
			key := "nul-" + uuid.NewString()
			p := legacy.do("POST", "/v1/invoices", "tok1", []byte(tc.body), "Idempotency-Key", key)
			if p.Status != http.StatusBadRequest || p.code(t) != "validation_failed" || !namesField(t, p, tc.field) {
				t.Fatalf("legacy POST %s: %d %s, want 400 validation_failed on %s", tc.body, p.Status, p.Body, tc.field)
			}
		}
		if n := h.count("invoices", "1 = 1"); n != 0 {
			t.Fatalf("%d invoices stored, want none", n)
		}
		if n := h.count("invoice_lines", "1 = 1") + h.count("invoice_events", "1 = 1"); n != 0 {
			t.Fatalf("%d lines and events stored, want none", n)
		}
		// A backslash and the text u0000 is not a NUL.
		id := uuid.New()
		r := h.do("PUT", invoicePath(id), "tok1", []byte(`{"customer":"\\u0000","lines":[{"text":"a","amount":1}]}`))
		if r.Status != http.StatusCreated {
			t.Fatalf("PUT of the text \\u0000: %d %s, want 201", r.Status, r.Body)
		}
		if got := h.row(id).Customer; got != `\u0000` {
			t.Fatalf("customer stored as %q, want %q", got, `\u0000`)
		}
	})
}

// namesField reports whether the problem r names field among its errors.
func namesField(t *testing.T, r reply, field string) bool {
	t.Helper()
	var p struct {
		Errors []struct {
			Field string `json:"field"`
		} `json:"errors"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body %q: %v", r.Body, err)
	}
	for _, e := range p.Errors {
		if e.Field == field {
			return true
		}
	}
	return false
}
