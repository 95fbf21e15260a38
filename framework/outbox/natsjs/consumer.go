package natsjs

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/retrysafe/retrysafe/framework/outbox"
)

// Handler applies one event. It must be idempotent by [outbox.Event.ID]
// (use package inbox): a message is delivered at least once. A nil error
// acks the message; an error naks it, and it is delivered again.
type Handler func(ctx context.Context, ev outbox.Event) error

// ConsumerConfig tunes [Consume].
type ConsumerConfig struct {
	// Durable is the durable consumer's name; the server remembers what it
	// acked across restarts. Required.
	Durable string
	// Stream is the stream to consume. Defaults to "RETRYSAFE_EVENTS".
	Stream string
	// SubjectPrefix and DuplicateWindow are the stream's settings, as in
	// the publisher's [Config]: when the stream is absent (no event was
	// published yet), Consume creates it with them, as the [Publisher]
	// would. Set them as the publisher's. Default to "retrysafe" and 2m.
	SubjectPrefix   string
	DuplicateWindow time.Duration
	// FilterSubjects limit the consumer to these subjects (wildcards
	// allowed, "retrysafe.*.payment.succeeded"). Defaults to every subject
	// of the stream.
	FilterSubjects []string
	// AckWait is how long the server waits for an ack before it delivers a
	// message again. Defaults to 30s.
	AckWait time.Duration
	// NakDelay is the pause before a message whose handler failed is
	// delivered again. Defaults to 1s.
	NakDelay time.Duration
	// TracerProvider makes the consumer spans. Defaults to a no-op one.
	TracerProvider trace.TracerProvider
	// Logger receives handler failures. Defaults to discarding them.
	// A zap user passes slog.New(zapslog.NewHandler(core)), from
	// go.uber.org/zap/exp/zapslog.
	Logger *slog.Logger
}

// Consumer is a running [Consume].
type Consumer struct {
	cc jetstream.ConsumeContext
}

// Stop stops delivering messages. A handler that runs finishes first.
func (c *Consumer) Stop() { c.cc.Stop() }

// Consume creates (or updates) the durable consumer with explicit acks and
// delivers its messages to h until [Consumer.Stop]. A consumer may start
// before the first event is published: it creates the stream when it is
// absent, with the settings a [Publisher] creates it with.
func Consume(ctx context.Context, js jetstream.JetStream, h Handler, cfg ConsumerConfig) (*Consumer, error) {
	if js == nil || h == nil {
		return nil, errors.New("natsjs: Consume needs a JetStream context and a handler")
	}
	if cfg.Durable == "" {
		return nil, errors.New("natsjs: ConsumerConfig.Durable is required")
	}
	if cfg.AckWait < 0 || cfg.NakDelay < 0 {
		return nil, errors.New("natsjs: ConsumerConfig durations must not be negative")
	}
	stream, err := Config{Stream: cfg.Stream, SubjectPrefix: cfg.SubjectPrefix, DuplicateWindow: cfg.DuplicateWindow}.withDefaults()
	if err != nil {
		return nil, err
	}
	cfg.Stream = stream.Stream
	if cfg.AckWait == 0 {
		cfg.AckWait = 30 * time.Second
	}
	if cfg.NakDelay == 0 {
		cfg.NakDelay = time.Second
	}
	if cfg.TracerProvider == nil {
		cfg.TracerProvider = noop.NewTracerProvider()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cc := jetstream.ConsumerConfig{Durable: cfg.Durable, AckPolicy: jetstream.AckExplicitPolicy,
		AckWait: cfg.AckWait, DeliverPolicy: jetstream.DeliverAllPolicy}
	switch len(cfg.FilterSubjects) {
	case 0:
	case 1:
		cc.FilterSubject = cfg.FilterSubjects[0]
	default:
		cc.FilterSubjects = cfg.FilterSubjects
	}
	if err := ensureStream(ctx, js, stream); err != nil {
		return nil, err
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, cfg.Stream, cc)
	if err != nil {
		return nil, fmt.Errorf("natsjs: consumer %s: %w", cfg.Durable, err)
	}
	tracer := cfg.TracerProvider.Tracer("github.com/retrysafe/retrysafe/framework/outbox/natsjs")
	run, err := cons.Consume(func(msg jetstream.Msg) {
		ev, err := Decode(msg)
		if err != nil {
			// A message that is not an outbox event never will be: drop it.
			cfg.Logger.LogAttrs(context.Background(), slog.LevelError, "not an outbox event", slog.String("subject", msg.Subject()), slog.String("error", err.Error()))
			_ = msg.Term()
			return
		}
		producer := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(ev.Headers))
		hctx, span := tracer.Start(context.Background(), "consume "+ev.Type,
			trace.WithSpanKind(trace.SpanKindConsumer),
			trace.WithLinks(trace.LinkFromContext(producer)),
			trace.WithAttributes(
				attribute.String("messaging.system", "nats"),
				attribute.String("messaging.destination.name", msg.Subject()),
				attribute.String("messaging.consumer.group.name", cfg.Durable),
				attribute.String("messaging.message.id", ev.ID.String()),
				attribute.String("retrysafe.event.type", ev.Type),
				attribute.Int64("retrysafe.event.seq", ev.Seq),
			))
		defer span.End()
		if err := h(hctx, ev); err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, "handler failed")
			cfg.Logger.LogAttrs(hctx, slog.LevelWarn, "event handler failed, redelivering",
				slog.String("event", ev.ID.String()), slog.String("type", ev.Type), slog.String("error", err.Error()),
				slog.String("trace_id", span.SpanContext().TraceID().String()))
			_ = msg.NakWithDelay(cfg.NakDelay)
			return
		}
		if err := msg.DoubleAck(hctx); err != nil {
			// The effect is committed with its inbox row: a redelivery of
			// this message is dropped by the inbox.
			cfg.Logger.LogAttrs(hctx, slog.LevelWarn, "ack failed", slog.String("event", ev.ID.String()), slog.String("error", err.Error()))
		}
	}, jetstream.ConsumeErrHandler(func(_ jetstream.ConsumeContext, err error) {
		cfg.Logger.LogAttrs(context.Background(), slog.LevelDebug, "consumer", slog.String("error", err.Error()))
	}))
	if err != nil {
		return nil, fmt.Errorf("natsjs: consume %s: %w", cfg.Durable, err)
	}
	return &Consumer{cc: run}, nil
}

// Decode rebuilds the outbox event a message carries.
func Decode(msg jetstream.Msg) (outbox.Event, error) {
	h := msg.Headers()
	id, err := uuid.Parse(h.Get(HeaderEventID))
	if err != nil {
		return outbox.Event{}, fmt.Errorf("natsjs: message ID: %w", err)
	}
	seq, err := strconv.ParseInt(h.Get(HeaderSeq), 10, 64)
	if err != nil {
		return outbox.Event{}, fmt.Errorf("natsjs: %s: %w", HeaderSeq, err)
	}
	created, _ := time.Parse(time.RFC3339Nano, h.Get(HeaderCreatedAt))
	ev := outbox.Event{ID: id, Tenant: h.Get(HeaderTenant), Type: h.Get(HeaderType),
		AggregateType: h.Get(HeaderAggregateType), AggregateID: h.Get(HeaderAggregateID), Seq: seq,
		Payload: json.RawMessage(msg.Data()), CreatedAt: created}
	for _, k := range (propagation.TraceContext{}).Fields() {
		if v := h.Get(k); v != "" {
			if ev.Headers == nil {
				ev.Headers = map[string]string{}
			}
			ev.Headers[k] = v
		}
	}
	if ev.Tenant == "" || ev.Type == "" {
		return outbox.Event{}, errors.New("natsjs: message without tenant or type")
	}
	return ev, nil
}
