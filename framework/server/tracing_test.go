package server_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/retrysafe/retrysafe/framework/server"
)

// TestPropagateTraceContextLeavesWhatANoopTraceRequestsLeaves: the span
// context a handler sees, with and without a traceparent (valid, sampled
// or not, with a tracestate, malformed), is the one TraceRequests with a
// no-op tracer provider leaves, and the request's context is restored
// after the handler.
func TestPropagateTraceContextLeavesWhatANoopTraceRequestsLeaves(t *testing.T) {
	headers := []map[string]string{
		{},
		{"Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"},
		{"Traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", "Tracestate": "vendor=1"},
		{"Traceparent": "00-00000000000000000000000000000000-00f067aa0ba902b7-01"},
		{"Traceparent": "not a traceparent"},
	}
	seen := func(mw gin.HandlerFunc, h map[string]string) (trace.SpanContext, bool) {
		var sc trace.SpanContext
		restored := false
		r := gin.New()
		r.Use(func(c *gin.Context) {
			before := c.Request.Context()
			c.Next()
			restored = c.Request.Context() == before
		}, mw)
		r.GET("/x", func(c *gin.Context) { sc = trace.SpanContextFromContext(c.Request.Context()) })
		req := httptest.NewRequest(http.MethodGet, "/x", nil)
		for k, v := range h {
			req.Header.Set(k, v)
		}
		r.ServeHTTP(httptest.NewRecorder(), req)
		return sc, restored
	}
	for i, h := range headers {
		want, _ := seen(server.TraceRequests("svc", noop.NewTracerProvider()), h)
		got, restored := seen(server.PropagateTraceContext(), h)
		if !got.Equal(want) || got.TraceState().String() != want.TraceState().String() {
			t.Errorf("headers %d %v: span context %+v, TraceRequests with a no-op provider leaves %+v", i, h, got, want)
		}
		if !restored {
			t.Errorf("headers %d: the request's context was not restored after the handler", i)
		}
		if i == 1 && !got.IsValid() {
			t.Errorf("a valid traceparent gave no span context")
		}
	}
}
