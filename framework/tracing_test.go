package framework_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/retrysafe/retrysafe/framework"
)

func TestTraceLogHandlerAddsTheTraceID(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(framework.TraceLogHandler(slog.NewJSONHandler(&buf, nil)))
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
