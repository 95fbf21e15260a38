package app

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/inbox"
	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/outbox/natsjs"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/resources/ledger"
)

// EventsConfig configures the demo's events: the outbox relay and the
// ledger consumer.
type EventsConfig struct {
	// NATSURL turns NATS JetStream on: the relay publishes there and the
	// ledger reads a durable consumer. Defaults to "": the relay hands
	// events to the ledger in process, so the demo needs no broker.
	NATSURL string
	// Stream, SubjectPrefix and DuplicateWindow configure the stream, which
	// the publisher or the consumer creates, whichever comes first (see
	// natsjs.Config for their defaults).
	Stream          string
	SubjectPrefix   string
	DuplicateWindow time.Duration
	// PublishTimeout bounds one publish. Defaults to natsjs's 5s.
	PublishTimeout time.Duration
	// Durable is the ledger's durable consumer. Defaults to "ledger".
	Durable string
	// NakDelay is the pause before a failed message is redelivered.
	// Defaults to natsjs's 1s.
	NakDelay time.Duration
	// Relay tunes the relay; its Registerer, Logger and TracerProvider
	// default to the app's, its clock to the wall clock (event times are the writers'
	// wall clock too). Defaults to outbox.Config's.
	Relay outbox.Config
}

// Events is the outbox relay, its publisher, and the ledger consumer.
type Events struct {
	Relay     *outbox.Relay
	Publisher outbox.Publisher
	// NATS is the JetStream publisher when NATSURL is set, else nil.
	NATS   *natsjs.Publisher
	Inbox  *inbox.Inbox
	Ledger *ledger.Ledger
	// JetStream is the JetStream context when NATSURL is set, else nil.
	JetStream jetstream.JetStream

	cfg    EventsConfig
	conn   *nats.Conn
	tracer trace.Tracer
	logger *slog.Logger
	tp     trace.TracerProvider

	mu       sync.Mutex
	consumer *natsjs.Consumer
	cancel   context.CancelFunc
	done     chan struct{}
}

func newEvents(engine *framework.Engine, reg prometheus.Registerer, tp trace.TracerProvider, cfg EventsConfig, logger *slog.Logger) (*Events, error) {
	in, err := inbox.New(engine.DB(), inbox.Config{Registerer: reg, Now: engine.Now})
	if err != nil {
		return nil, err
	}
	led, err := ledger.New(engine, in)
	if err != nil {
		return nil, err
	}
	ev := &Events{Inbox: in, Ledger: led, cfg: cfg, logger: logger, tp: tp,
		tracer: tp.Tracer("github.com/retrysafe/retrysafe/cmd/demo")}
	if cfg.NATSURL == "" {
		ev.Publisher = outbox.PublisherFunc(ev.deliverInProcess)
	} else {
		// The connection retries in the background: the API starts and
		// serves while NATS is down, and the outbox keeps the events.
		ev.conn, err = nats.Connect(cfg.NATSURL, nats.Name("retrysafe-demo"), nats.RetryOnFailedConnect(true),
			nats.MaxReconnects(-1), nats.ReconnectWait(250*time.Millisecond))
		if err != nil {
			return nil, fmt.Errorf("app: nats: %w", err)
		}
		if ev.JetStream, err = jetstream.New(ev.conn); err != nil {
			ev.conn.Close()
			return nil, err
		}
		ev.NATS, err = natsjs.NewPublisher(ev.JetStream, natsjs.Config{Stream: cfg.Stream, SubjectPrefix: cfg.SubjectPrefix,
			DuplicateWindow: cfg.DuplicateWindow, PublishTimeout: cfg.PublishTimeout})
		if err != nil {
			ev.conn.Close()
			return nil, err
		}
		ev.Publisher = ev.NATS
	}
	rc := cfg.Relay
	if rc.Registerer == nil {
		rc.Registerer = reg
	}
	if rc.Logger == nil {
		rc.Logger = logger
	}
	if rc.TracerProvider == nil {
		rc.TracerProvider = tp
	}
	if ev.Relay, err = outbox.NewRelay(engine.DB(), ev.Publisher, rc); err != nil {
		ev.close()
		return nil, err
	}
	return ev, nil
}

// deliverInProcess is the publisher without a broker: the ledger consumes
// the event at once, in a consumer span linked to the writing request. An
// error leaves the event pending; the relay delivers it again.
func (ev *Events) deliverInProcess(ctx context.Context, e outbox.Event) error {
	producer := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier(e.Headers))
	ctx, span := ev.tracer.Start(ctx, "consume "+e.Type, trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(trace.LinkFromContext(producer)))
	err := ev.Ledger.Handle(ctx, e)
	telemetry.EndSpan(span, err)
	return err
}

// StartConsumer starts the ledger's durable JetStream consumer (a no-op
// without NATS: the relay delivers in process).
func (ev *Events) StartConsumer(ctx context.Context) error {
	ev.mu.Lock()
	defer ev.mu.Unlock()
	if ev.JetStream == nil || ev.consumer != nil {
		return nil
	}
	subject := cmp.Or(ev.cfg.SubjectPrefix, natsjs.DefaultSubjectPrefix)
	c, err := natsjs.Consume(ctx, ev.JetStream, ev.Ledger.Handle, natsjs.ConsumerConfig{
		Durable: cmp.Or(ev.cfg.Durable, ledger.Consumer),
		Stream:  ev.cfg.Stream, SubjectPrefix: ev.cfg.SubjectPrefix, DuplicateWindow: ev.cfg.DuplicateWindow,
		FilterSubjects: []string{subject + ".*." + ledger.EventPaymentSucceeded},
		NakDelay:       ev.cfg.NakDelay, TracerProvider: ev.tp, Logger: ev.logger,
	})
	if err != nil {
		return err
	}
	ev.consumer = c
	return nil
}

// start runs the relay and, with NATS, the consumer. The consumer needs
// NATS (it creates the stream when absent): while NATS is down, the loop
// below starts it later.
func (ev *Events) start(ctx context.Context) error {
	if err := ev.Relay.Start(ctx); err != nil {
		return err
	}
	if ev.JetStream == nil {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	ev.mu.Lock()
	ev.cancel, ev.done = cancel, done
	ev.mu.Unlock()
	go func() {
		defer close(done)
		for wait := 250 * time.Millisecond; ctx.Err() == nil; wait = min(2*wait, 10*time.Second) {
			err := ev.StartConsumer(ctx)
			if err == nil {
				return
			}
			ev.logger.LogAttrs(ctx, slog.LevelWarn, "ledger consumer not started, retrying", slog.String("error", err.Error()))
			select {
			case <-ctx.Done():
			case <-time.After(wait):
			}
		}
	}()
	return nil
}

func (ev *Events) close() {
	if ev.Relay != nil {
		ev.Relay.Stop()
	}
	ev.mu.Lock()
	cancel, done := ev.cancel, ev.done
	ev.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	ev.mu.Lock()
	if ev.consumer != nil {
		ev.consumer.Stop()
		ev.consumer = nil
	}
	ev.mu.Unlock()
	if ev.conn != nil {
		ev.conn.Close()
	}
}
