package framework

import (
	"context"
	"log/slog"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
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
	// resource ID (PUT), never the raw value.
	AttrKeyHash = attribute.Key("retrysafe.key_sha256")
)

// TraceRequests is the OpenTelemetry gin middleware (otelgin): every
// request runs in a server span of tp named "METHOD route", with the
// HTTP semantic-convention attributes (http.route,
// http.response.status_code, …), continuing the caller's W3C trace
// context (traceparent) when it sends one. service names the server
// (server.address). url.path holds the route, not the request's path:
// a PUT's path holds the resource ID, the key its retries repeat, which
// telemetry carries only as a hash ([AttrKeyHash]). A nil tp is the global provider
// (otel.GetTracerProvider); the propagator is always W3C Trace Context,
// not the global one, and otelgin's HTTP metrics go to the global meter
// provider. The patterns add [AttrPattern], [AttrOperation],
// [AttrOutcome] and [AttrKeyHash] to this span through [TraceOutcome];
// their steps ([StartSpan]), the store's transactions and the SQL
// statements (store.Config.TracerProvider) are its children. Mount it
// first.
func TraceRequests(service string, tp trace.TracerProvider) gin.HandlerFunc {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return otelgin.Middleware(service, otelgin.WithTracerProvider(routePathProvider{tp}),
		otelgin.WithPropagators(propagation.TraceContext{}))
}

// routePathProvider gives otelgin tracers whose spans carry their
// http.route as url.path, replacing the request's path.
type routePathProvider struct{ trace.TracerProvider }

func (p routePathProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return routePathTracer{p.TracerProvider.Tracer(name, opts...)}
}

type routePathTracer struct{ trace.Tracer }

func (t routePathTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	route := "unmatched"
	cfg := trace.NewSpanStartConfig(opts...)
	for _, kv := range cfg.Attributes() {
		if kv.Key == "http.route" && kv.Value.AsString() != "" {
			route = kv.Value.AsString()
		}
	}
	span.SetAttributes(attribute.String("url.path", route))
	wrapped := serverSpan{Span: span, ctx: ctx}
	return trace.ContextWithSpan(ctx, wrapped), wrapped
}

// serverSpan is otelgin's server span of a request whose context is ctx:
// when the client went away ([ClientGone]), the 5xx written to nobody does
// not mark the span as an error.
type serverSpan struct {
	trace.Span
	ctx context.Context
}

func (s serverSpan) SetStatus(code codes.Code, description string) {
	if code == codes.Error && ClientGone(s.ctx) {
		return
	}
	s.Span.SetStatus(code, description)
}

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
