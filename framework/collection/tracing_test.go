package collection_test

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/framework/collection"

	"github.com/google/uuid"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func TestTraceLogHandlerAddsTheTraceID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(telemetry.TraceLogHandler(slog.NewJSONHandler(&buf, nil)))
	tp := sdktrace.NewTracerProvider()
	ctx, span := tp.Tracer("test").Start(context.Background(), "request")
	logger.InfoContext(ctx, "inside")
	span.End()
	logger.InfoContext(context.Background(), "outside")
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 2 {
		t.Fatalf("log: %s", buf.Bytes())
	}
	var inside, outside map[string]any
	_ = json.Unmarshal(lines[0], &inside)
	_ = json.Unmarshal(lines[1], &outside)
	if inside["trace_id"] != span.SpanContext().TraceID().String() || inside["span_id"] == nil {
		t.Fatalf("inside a span: %v", inside)
	}
	if _, ok := outside["trace_id"]; ok {
		t.Fatalf("outside a span: %v", outside)
	}
}

// TestTraceOfAPutCreate sends one PUT create over HTTP, with an outbox
// event written by the creation hook, and relays the event: the server
// span (otelgin), the store's transaction span, the SQL spans and the
// relay's producer span are one trace, and no span carries a value of the
// request body or the resource ID (the PUT's key) in the clear.
func TestTraceOfAPutCreate(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		exporter := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
		h := setup(t, dsn, func(o *setupOptions) {
			o.tp, o.outbox = tp, true
			o.resource = func(r *collection.Resource[InvoiceCommand, Invoice]) {
				r.OnCreateFunc = func(ctx context.Context, tx *gorm.DB, c collection.Change[Invoice]) error {
					ev, err := outbox.NewEvent(c.Model.TenantID, "invoice.created", "invoice", c.Model.ID.String(), c.Representation)
					if err != nil {
						return err
					}
					_, err = outbox.Write(ctx, tx, ev)
					return err
				}
			}
		})
		const secret = "Customer-7f3a9c"
		id := uuid.New()
		r := h.do(http.MethodPut, "/v1/invoices/"+id.String(), "tok1",
			[]byte(`{"customer":"`+secret+`","lines":[{"text":"Line-5d2e81","amount":4711}]}`))
		if r.Status != http.StatusCreated {
			t.Fatalf("PUT: %d %s", r.Status, r.Body)
		}
		relay, err := outbox.NewRelay(h.db, outbox.PublisherFunc(func(context.Context, outbox.Event) error { return nil }),
			outbox.Config{TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		if stats, err := relay.Drain(context.Background()); err != nil || stats.Published != 1 {
			t.Fatalf("drain: %+v, %v", stats, err)
		}

		spans := exporter.GetSpans()
		byID := map[trace.SpanID]tracetest.SpanStub{}
		var server *tracetest.SpanStub
		for i, s := range spans {
			byID[s.SpanContext.SpanID()] = s
			if s.Name == "PUT /v1/invoices/:id" && s.SpanKind == trace.SpanKindServer {
				server = &spans[i]
			}
		}
		if server == nil {
			t.Fatalf("no server span among %v", spanNames(spans))
		}
		if server.InstrumentationScope.Name != otelgin.ScopeName {
			t.Fatalf("server span from %q, want otelgin", server.InstrumentationScope.Name)
		}
		attrs := map[string]string{}
		for _, kv := range server.Attributes {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		want := map[string]string{"retrysafe.pattern": "put", "retrysafe.operation": "invoices",
			"retrysafe.outcome": "executed", "retrysafe.key_sha256": telemetry.KeyHash(id.String()),
			"http.route": "/v1/invoices/:id", "url.path": "/v1/invoices/:id", "http.response.status_code": "201"}
		for k, v := range want {
			if attrs[k] != v {
				t.Fatalf("server span %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
			}
		}
		// under reports whether s descends from the server span.
		under := func(s tracetest.SpanStub) bool {
			for s.Parent.IsValid() {
				if s.Parent.SpanID() == server.SpanContext.SpanID() {
					return true
				}
				var ok bool
				if s, ok = byID[s.Parent.SpanID()]; !ok {
					return false
				}
			}
			return false
		}
		var writes, sql, producers int
		var statements []string
		for _, s := range spans {
			for _, kv := range s.Attributes {
				// The amount's digits are looked for outside hashes: the
				// key's SHA-256 is random hex, and 1 in about 1,000 holds
				// "4711".
				if v := kv.Value.Emit(); strings.Contains(v, secret) || strings.Contains(v, "Line-5d2e81") ||
					strings.Contains(v, "4711") && !isSHA256Hex(v) || strings.Contains(v, id.String()) {
					t.Fatalf("span %q carries a request value: %s = %s", s.Name, kv.Key, v)
				}
			}
			if s.SpanContext.TraceID() != server.SpanContext.TraceID() {
				continue
			}
			switch {
			case s.Name == "store.write" && s.Parent.SpanID() == server.SpanContext.SpanID():
				writes++
			case s.InstrumentationScope.Name == otelpgxScope || s.InstrumentationScope.Name == otelsqlScope:
				if !under(s) {
					t.Fatalf("SQL span %q is not under the server span", s.Name)
				}
				sql++
				for _, kv := range s.Attributes {
					if kv.Key == "db.query.text" || kv.Key == "db.statement" {
						statements = append(statements, kv.Value.AsString())
					}
				}
			case s.Name == "publish invoice.created" && s.SpanKind == trace.SpanKindProducer:
				if !under(s) {
					t.Fatalf("producer span is not under the server span")
				}
				producers++
			}
		}
		if writes != 1 || sql == 0 || producers != 1 {
			t.Fatalf("in the request's trace: %d store.write, %d SQL, %d producer spans; all: %v", writes, sql, producers, spanNames(spans))
		}
		if !slices.ContainsFunc(statements, func(q string) bool { return strings.Contains(q, "INSERT INTO") && strings.Contains(q, "invoices") }) {
			t.Fatalf("no SQL span holds the INSERT of the invoice: %q", statements)
		}
	})
}

// The instrumentation scopes of the SQL spans.
const (
	otelpgxScope = "github.com/exaring/otelpgx"
	otelsqlScope = "github.com/XSAM/otelsql"
)

func spanNames(spans tracetest.SpanStubs) []string {
	names := make([]string, len(spans))
	for i, s := range spans {
		names[i] = s.InstrumentationScope.Name + ": " + s.Name
	}
	return names
}

// isSHA256Hex reports whether v is a SHA-256 in hex, as the key's hash
// attribute is.
func isSHA256Hex(v string) bool {
	if len(v) != 64 {
		return false
	}
	_, err := hex.DecodeString(v)
	return err == nil
}
