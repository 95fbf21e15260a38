package collection_test

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/openapi"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

// codeInvoiceSent is a business code of the application's own, which the
// invoices' replace guard answers once an invoice was sent.
const codeInvoiceSent wire.Code = "invoice_sent"

// TestResourceProblemsAreAnsweredAndDescribed: a resource declares the
// problem codes of its own that its functions answer
// (Resource.Problems): its replace guard's 409 invoice_sent is the wire
// answer of a PUT and a PATCH that would replace a sent invoice, which
// stays as it was, and the OpenAPI document lists the code for PUT,
// PATCH and the legacy POST. A code the engine does not know fails New.
func TestResourceProblemsAreAnsweredAndDescribed(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		h := setup(t, dsn, func(o *setupOptions) {
			o.codes = []wire.CodeInfo{{Code: codeInvoiceSent, Status: http.StatusConflict, Title: "Invoice sent"}}
			o.resource = func(r *collection.Resource[InvoiceCommand, Invoice]) {
				r.ReplaceGuardFunc = func(m *Invoice) error {
					if m.Status == "sent" {
						return framework.Errorf(codeInvoiceSent, "the invoice was sent")
					}
					return nil
				}
				r.Problems = []wire.Code{codeInvoiceSent}
			}
		})
		id := uuid.New()
		wantStatus(t, h.do(http.MethodPut, invoicePath(id), "tok1", invoiceBody("c", 100)), http.StatusCreated)
		if _, err := h.col.SetStatus(t.Context(), "t1", id, "sent"); err != nil {
			t.Fatal(err)
		}
		for _, r := range []reply{
			h.do(http.MethodPut, invoicePath(id), "tok1", invoiceBody("c", 200)),
			h.do(http.MethodPatch, invoicePath(id), "tok1", []byte(`{"customer":"d"}`), "Content-Type", collection.ContentTypeMergePatch),
		} {
			if r.Status != http.StatusConflict || r.code(t) != string(codeInvoiceSent) {
				t.Fatalf("a replace of a sent invoice: %d %s, want 409 invoice_sent", r.Status, r.Body)
			}
		}
		if m := h.row(id); m.Version != 2 || m.Customer != "c" || m.TotalAmount != 100 {
			t.Fatalf("a refused replace wrote: version %d, customer %q, total %d", m.Version, m.Customer, m.TotalAmount)
		}

		routes := append(h.col.Describe(), h.col.DescribeLegacyPOST(collection.LegacyConfig{}))
		doc, err := openapi.New(openapi.Config{Title: "t", Version: "1", Codes: h.engine.Codes()}, routes...)
		if err != nil {
			t.Fatal(err)
		}
		for _, op := range []struct {
			method, path string
		}{{http.MethodPut, "/v1/invoices/{id}"}, {http.MethodPatch, "/v1/invoices/{id}"}, {http.MethodPost, "/v1/invoices"}} {
			resp := doc.T().Paths.Value(op.path).GetOperation(op.method).Responses.Status(http.StatusConflict)
			if resp == nil || !strings.Contains(*resp.Value.Description, string(codeInvoiceSent)) {
				t.Fatalf("%s %s: 409 does not list invoice_sent: %+v", op.method, op.path, resp)
			}
		}

		res := invoiceResource(collection.CreateOrReplace)
		res.Problems = []wire.Code{"invoice_gone"}
		if _, err := collection.New(h.engine, res); !errors.Is(err, framework.ErrCodeUnregistered) {
			t.Fatalf("New with an unregistered problem code: %v, want ErrCodeUnregistered", err)
		}
	})
}
