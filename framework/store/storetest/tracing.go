package storetest

import (
	"context"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrysafe/retrysafe/framework/store"
)

// testSQLSpansRedactErrors: a statement the database refuses, quoting the
// value it refused, leaves no trace of that value in the SQL spans.
func testSQLSpansRedactErrors(t *testing.T, h Harness) {
	dsn := h.DSN(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	db, err := store.Open(context.Background(), dsn, store.Config{TracerProvider: tp})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	const secret = "secret-value-4711"
	query := h.RefusedQuery
	// otelpgx traces only under a recording span, as in a request.
	ctx, root := tp.Tracer("test").Start(context.Background(), "request")
	gdb := db.Gorm.WithContext(ctx)
	err = gdb.Exec(query, secret).Error
	if err == nil {
		t.Fatal("the database took a value it must refuse")
	}
	if h.RefusalQuotes && !strings.Contains(err.Error(), secret) {
		// The refusal quotes the value: the case the redaction is for.
		t.Fatalf("the refusal %v does not quote the value", err)
	}
	root.End()
	var errored int
	for _, s := range rec.Ended() {
		if s.Status().Code == codes.Error {
			errored++
		}
		texts := []string{s.Name(), s.Status().Description}
		for _, ev := range s.Events() {
			for _, a := range ev.Attributes {
				texts = append(texts, a.Value.Emit())
			}
		}
		for _, a := range s.Attributes() {
			texts = append(texts, a.Value.Emit())
		}
		for _, text := range texts {
			if strings.Contains(text, secret) {
				t.Fatalf("span %q carries the refused value: %q", s.Name(), text)
			}
		}
	}
	if errored == 0 {
		t.Fatal("no SQL span recorded the failure")
	}
}
