package outbox

import "context"

// Publisher hands one event to a broker. The relay calls Publish for the
// events of one aggregate in sequence order, one at a time, and marks an
// event published only after Publish returned nil, so a publisher sees an
// event again after a crash: publishing must be idempotent by [Event.ID]
// (JetStream drops a repeated Nats-Msg-Id in its window; consumers keep an
// inbox).
//
// A Publish error wrapping [ErrRefused] refuses this event alone; any other
// error means the broker is unavailable.
type Publisher interface {
	Publish(ctx context.Context, ev Event) error
}

// PublisherFunc adapts a function to [Publisher]: an in-process publisher
// that calls consumers directly, for a process without a broker.
type PublisherFunc func(ctx context.Context, ev Event) error

// Publish calls f.
func (f PublisherFunc) Publish(ctx context.Context, ev Event) error { return f(ctx, ev) }
