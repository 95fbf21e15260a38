package main

import (
	"context"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// tracerProvider exports spans with OTLP over HTTP when endpoint (the value
// of OTEL_EXPORTER_OTLP_ENDPOINT) is set, and traces nothing otherwise. The
// exporter reads the other OTEL_EXPORTER_OTLP_* variables itself. The
// returned function flushes and stops it.
func tracerProvider(ctx context.Context, endpoint string) (trace.TracerProvider, func(context.Context) error, error) {
	if endpoint == "" {
		return noop.NewTracerProvider(), func(context.Context) error { return nil }, nil
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, nil, err
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("retrysafe-demo"))))
	return tp, tp.Shutdown, nil
}
