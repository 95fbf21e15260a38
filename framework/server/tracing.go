package server

import (
	"context"

	"github.com/retrysafe/retrysafe/framework/telemetry"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/contrib/instrumentation/github.com/gin-gonic/gin/otelgin"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// TraceRequests is the OpenTelemetry gin middleware (otelgin): every
// request runs in a server span of tp named "METHOD route", with the
// HTTP semantic-convention attributes (http.route,
// http.response.status_code, …), continuing the caller's W3C trace
// context (traceparent) when it sends one. service names the server
// (server.address). url.path holds the route, not the request's path:
// a PUT's path holds the resource ID, the key its retries repeat, which
// telemetry carries only as a hash ([telemetry.AttrKeyHash]). A nil tp is
// the global provider (otel.GetTracerProvider); the propagator is always
// W3C Trace Context, not the global one, and otelgin's HTTP metrics go to
// the global meter provider. The patterns add [telemetry.AttrPattern],
// [telemetry.AttrOperation], [telemetry.AttrOutcome] and
// [telemetry.AttrKeyHash] to this span through [telemetry.TraceOutcome];
// their steps ([telemetry.StartSpan]), the store's transactions and the
// SQL statements (store.Config.TracerProvider) are its children. Mount it
// first.
func TraceRequests(service string, tp trace.TracerProvider) gin.HandlerFunc {
	if tp == nil {
		tp = otel.GetTracerProvider()
	}
	return otelgin.Middleware(service, otelgin.WithTracerProvider(routePathProvider{tp}),
		otelgin.WithPropagators(propagation.TraceContext{}))
}

// PropagateTraceContext continues the caller's W3C trace context
// (traceparent, tracestate) in each request's context without starting a
// span: what [TraceRequests] leaves in the context when its tracer
// provider is a no-op one, without building the span's attributes or
// recording otelgin's HTTP metrics. Mount it instead of TraceRequests
// where nothing traces requests and nothing reads otelgin's metrics (the
// framework's own are [telemetry.Metrics]); the store's spans, event
// headers and logs still carry the caller's trace.
func PropagateTraceContext() gin.HandlerFunc {
	var tc propagation.TraceContext
	return func(c *gin.Context) {
		if c.Request.Header.Get("Traceparent") == "" {
			c.Next()
			return
		}
		saved := c.Request.Context()
		c.Request = c.Request.WithContext(tc.Extract(saved, propagation.HeaderCarrier(c.Request.Header)))
		defer func() { c.Request = c.Request.WithContext(saved) }()
		c.Next()
	}
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
// when the client went away ([telemetry.ClientGone]), the 5xx written to nobody does
// not mark the span as an error.
type serverSpan struct {
	trace.Span
	ctx context.Context
}

func (s serverSpan) SetStatus(code codes.Code, description string) {
	if code == codes.Error && telemetry.ClientGone(s.ctx) {
		return
	}
	s.Span.SetStatus(code, description)
}
