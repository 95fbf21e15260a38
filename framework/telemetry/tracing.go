package telemetry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// TracerName is the instrumentation scope of the framework's spans.
const TracerName = "github.com/retrysafe/retrysafe"

// Span attributes of an idempotent write, set on the request's span.
const (
	AttrPattern   = attribute.Key("retrysafe.pattern")
	AttrOperation = attribute.Key("retrysafe.operation")
	// AttrOutcome is executed, replayed, converged or refused (any answer
	// that executed nothing and replayed nothing: 4xx, 409, 503).
	AttrOutcome = attribute.Key("retrysafe.outcome")
	// AttrKeyHash is the SHA-256 of the idempotency key (POST) or of the
	// resource ID (PUT) ([KeyHash]), never the raw value.
	AttrKeyHash = attribute.Key("retrysafe.key_sha256")
)

// TraceOutcome sets the attributes of an idempotent write on the span in
// ctx (the request's): pattern ("put", "patch", "post", "legacy_post"), operation,
// outcome ([OutcomeExecuted], [OutcomeReplayed], [OutcomeConverged]; every
// other metrics outcome is reported as "refused") and the key's hash.
func TraceOutcome(ctx context.Context, pattern, operation, outcome, key string) {
	span := trace.SpanFromContext(ctx)
	if !span.IsRecording() {
		return
	}
	switch outcome {
	case OutcomeExecuted, OutcomeReplayed, OutcomeConverged:
	default:
		outcome = "refused"
	}
	attrs := []attribute.KeyValue{AttrPattern.String(pattern), AttrOperation.String(operation), AttrOutcome.String(outcome)}
	if key != "" {
		attrs = append(attrs, AttrKeyHash.String(KeyHash(key)))
	}
	span.SetAttributes(attrs...)
}

// StartSpan starts a child span of the span in ctx, on that span's tracer
// provider: without a recording span in ctx (no tracing configured) it is a
// no-op. End the span when the step ends.
func StartSpan(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return trace.SpanFromContext(ctx).TracerProvider().Tracer(TracerName).Start(ctx, name, trace.WithAttributes(attrs...))
}

// KeyHash is the SHA-256 of an idempotency key's bytes in lowercase hex
// (what `printf %s "$KEY" | sha256sum` prints, and the Go client logs as
// key_sha256): what logs, spans, audit rows and the admin tool carry
// instead of the raw key.
func KeyHash(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// EndSpan records err (if any) on span and ends it.
func EndSpan(span trace.Span, err error) {
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}

// TraceLogHandler wraps h so that every record logged with a context that
// holds a span carries its trace_id and span_id.
func TraceLogHandler(h slog.Handler) slog.Handler { return traceLogHandler{h} }

type traceLogHandler struct{ slog.Handler }

func (h traceLogHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return h.Handler.Handle(ctx, r)
}

func (h traceLogHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return traceLogHandler{h.Handler.WithAttrs(attrs)}
}

func (h traceLogHandler) WithGroup(name string) slog.Handler {
	return traceLogHandler{h.Handler.WithGroup(name)}
}
