package store

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"net"
	"syscall"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
)

// tracerName is the instrumentation scope of the store's own spans.
const tracerName = "github.com/retrysafe/retrysafe/framework/store"

// endSpan records err (if any) on span, without the values it may quote
// ([RedactError]), and ends it.
func endSpan(span trace.Span, err error) {
	if err != nil {
		msg := RedactError(err)
		span.AddEvent("exception", trace.WithAttributes(attribute.String("exception.message", msg)))
		span.SetStatus(codes.Error, msg)
	}
	span.End()
}

// RedactingTracerProvider returns a provider whose tracers make spans
// that record an error's text without the values it quotes
// ([RedactError]), for the SQL tracers a [Driver] installs (otelpgx,
// otelsql): a database's message can quote the input it refused
// (PostgreSQL's `invalid input syntax for type uuid: "…"`), and telemetry
// carries no request field value (DESIGN §7).
func RedactingTracerProvider(tp trace.TracerProvider) trace.TracerProvider {
	return redactingProvider{tp}
}

type redactingProvider struct{ trace.TracerProvider }

func (p redactingProvider) Tracer(name string, opts ...trace.TracerOption) trace.Tracer {
	return redactingTracer{p.TracerProvider.Tracer(name, opts...)}
}

type redactingTracer struct{ trace.Tracer }

func (t redactingTracer) Start(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	ctx, span := t.Tracer.Start(ctx, name, opts...)
	// Into the context too: the tracers end a span they find there.
	wrapped := redactingSpan{span}
	return trace.ContextWithSpan(ctx, wrapped), wrapped
}

type redactingSpan struct{ trace.Span }

func (s redactingSpan) RecordError(err error, opts ...trace.EventOption) {
	if err == nil {
		return
	}
	s.Span.RecordError(errors.New(RedactError(err)), opts...)
}

func (s redactingSpan) SetStatus(code codes.Code, description string) {
	s.Span.SetStatus(code, quoted.ReplaceAllString(description, `"…"`))
}

// ConnectionLost reports errors that mean the connection to the database
// is gone or did not answer in time, whatever the driver: a network error,
// a closed connection, or the context's deadline (the request deadline ran
// out while waiting for a connection or an answer). Drivers report them as
// [ErrUnavailable].
func ConnectionLost(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) ||
		errors.Is(err, context.DeadlineExceeded) ||
		errors.Is(err, sql.ErrConnDone) ||
		errors.Is(err, driver.ErrBadConn) ||
		errors.Is(err, io.EOF) ||
		errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE)
}
