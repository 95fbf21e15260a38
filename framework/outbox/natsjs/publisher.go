package natsjs

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/retrysafe/retrysafe/framework/outbox"
)

// Defaults of [Config].
const (
	DefaultStream          = "RETRYSAFE_EVENTS"
	DefaultSubjectPrefix   = "retrysafe"
	DefaultDuplicateWindow = 2 * time.Minute
	DefaultPublishTimeout  = 5 * time.Second
)

// Headers that carry an event's fields. Nats-Msg-Id carries its ID too,
// for the stream's deduplication.
const (
	HeaderEventID       = "Retrysafe-Event-Id"
	HeaderTenant        = "Retrysafe-Tenant"
	HeaderType          = "Retrysafe-Event-Type"
	HeaderAggregateType = "Retrysafe-Aggregate-Type"
	HeaderAggregateID   = "Retrysafe-Aggregate-Id"
	HeaderSeq           = "Retrysafe-Seq"
	HeaderCreatedAt     = "Retrysafe-Created-At"
)

// Config tunes [NewPublisher]. The zero value is ready to use.
type Config struct {
	// Stream is the JetStream stream the events go to; it is created when
	// absent, with subjects "<SubjectPrefix>.>". Defaults to
	// "RETRYSAFE_EVENTS".
	Stream string
	// SubjectPrefix is the first token of every subject. Defaults to
	// "retrysafe".
	SubjectPrefix string
	// DuplicateWindow is the stream's deduplication window for a stream
	// this package creates. Defaults to 2m.
	DuplicateWindow time.Duration
	// PublishTimeout bounds one publish (until the stream's ack). Defaults
	// to 5s.
	PublishTimeout time.Duration
}

func (c Config) withDefaults() (Config, error) {
	if c.DuplicateWindow < 0 || c.PublishTimeout < 0 {
		return c, errors.New("natsjs: Config durations must not be negative")
	}
	if c.Stream == "" {
		c.Stream = DefaultStream
	}
	if c.SubjectPrefix == "" {
		c.SubjectPrefix = DefaultSubjectPrefix
	}
	if strings.ContainsAny(c.SubjectPrefix, " \t*>") || strings.HasSuffix(c.SubjectPrefix, ".") {
		return c, fmt.Errorf("natsjs: %q is not a subject prefix", c.SubjectPrefix)
	}
	if c.DuplicateWindow == 0 {
		c.DuplicateWindow = DefaultDuplicateWindow
	}
	if c.PublishTimeout == 0 {
		c.PublishTimeout = DefaultPublishTimeout
	}
	return c, nil
}

// Publisher publishes outbox events to a JetStream stream.
type Publisher struct {
	js  jetstream.JetStream
	cfg Config

	mu    sync.Mutex
	ready bool
}

var _ outbox.Publisher = (*Publisher)(nil)

// NewPublisher returns a publisher on js. It does not talk to the server:
// the stream is created on the first publish (and again whenever it is
// found missing), so a process starts while NATS is down.
func NewPublisher(js jetstream.JetStream, cfg Config) (*Publisher, error) {
	if js == nil {
		return nil, errors.New("natsjs: NewPublisher needs a JetStream context")
	}
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	return &Publisher{js: js, cfg: cfg}, nil
}

// Subject returns the subject of an event: "<prefix>.<tenant>.<type>". A
// character of the tenant that a subject token cannot hold (".", "*", ">",
// blanks) is replaced by "_".
func (p *Publisher) Subject(ev outbox.Event) string {
	return p.cfg.SubjectPrefix + "." + token(ev.Tenant) + "." + ev.Type
}

func token(s string) string {
	return strings.Map(func(r rune) rune {
		switch r {
		case '.', '*', '>', ' ', '\t', '\r', '\n':
			return '_'
		}
		return r
	}, s)
}

// EnsureStream creates the stream when it is absent.
func (p *Publisher) EnsureStream(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ready {
		return nil
	}
	if err := ensureStream(ctx, p.js, p.cfg); err != nil {
		return err
	}
	p.ready = true
	return nil
}

// ensureStream creates the stream of c (defaults applied) when it is
// absent: the one definition of the stream, for a [Publisher] and for
// [Consume], whichever comes first. Two that create it at once with the
// same settings both succeed.
func ensureStream(ctx context.Context, js jetstream.JetStream, c Config) error {
	_, err := js.Stream(ctx, c.Stream)
	if errors.Is(err, jetstream.ErrStreamNotFound) {
		_, err = js.CreateStream(ctx, jetstream.StreamConfig{
			Name: c.Stream, Subjects: []string{c.SubjectPrefix + ".>"},
			Storage: jetstream.FileStorage, Duplicates: c.DuplicateWindow,
		})
		if errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			err = nil
		}
	}
	if err != nil {
		return fmt.Errorf("natsjs: stream %s: %w", c.Stream, err)
	}
	return nil
}

// Publish implements [outbox.Publisher]. An event that cannot be published
// as it is (the stream rejected it with an API error, it is over the
// server's max_payload, its subject is invalid) is refused: the error wraps
// [outbox.ErrRefused]. A timeout, a lost connection or a missing stream is
// an outage.
func (p *Publisher) Publish(ctx context.Context, ev outbox.Event) error {
	_, err := p.PublishAck(ctx, ev)
	return err
}

// PublishAck publishes ev and returns the stream's ack, which says whether
// the stream dropped it as a duplicate.
func (p *Publisher) PublishAck(ctx context.Context, ev outbox.Event) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, p.cfg.PublishTimeout)
	defer cancel()
	if err := p.EnsureStream(ctx); err != nil {
		return nil, err
	}
	msg := nats.NewMsg(p.Subject(ev))
	msg.Data = ev.Payload
	for k, v := range ev.Headers {
		msg.Header.Set(k, v)
	}
	msg.Header.Set(HeaderEventID, ev.ID.String())
	msg.Header.Set(HeaderTenant, ev.Tenant)
	msg.Header.Set(HeaderType, ev.Type)
	msg.Header.Set(HeaderAggregateType, ev.AggregateType)
	msg.Header.Set(HeaderAggregateID, ev.AggregateID)
	msg.Header.Set(HeaderSeq, strconv.FormatInt(ev.Seq, 10))
	msg.Header.Set(HeaderCreatedAt, ev.CreatedAt.UTC().Format(time.RFC3339Nano))
	ack, err := p.js.PublishMsg(ctx, msg, jetstream.WithMsgID(ev.ID.String()), jetstream.WithRetryAttempts(0))
	if err == nil {
		return ack, nil
	}
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, nats.ErrNoResponders) {
		// The stream is gone (or JetStream is down): create it next time.
		p.mu.Lock()
		p.ready = false
		p.mu.Unlock()
		return nil, fmt.Errorf("natsjs: publish %s: %w", ev.ID, err)
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code != 503 ||
		errors.Is(err, nats.ErrMaxPayload) || errors.Is(err, nats.ErrBadSubject) {
		return nil, fmt.Errorf("%w: natsjs: publish %s: %w", outbox.ErrRefused, ev.ID, err)
	}
	return nil, fmt.Errorf("natsjs: publish %s: %w", ev.ID, err)
}
