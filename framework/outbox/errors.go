package outbox

import "errors"

var (
	// ErrInvalidEvent is returned by [Write] for an event without a tenant,
	// type or aggregate, or with a payload that is not JSON.
	ErrInvalidEvent = errors.New("outbox: invalid event")
	// ErrRefused marks a publisher error that refuses this one event (the
	// broker rejected it: too large, no stream for its subject). A
	// [Publisher] wraps it; the relay retries the event with backoff and
	// parks it after [Config.MaxAttempts] refusals. Any other publisher
	// error means the broker is unavailable: the relay keeps the event as
	// it is and backs off as a whole.
	ErrRefused = errors.New("outbox: event refused by the publisher")
	// ErrUnavailable is returned by [Relay.RunOnce], wrapping the
	// publisher's error, when the broker was unavailable: the events of the
	// batch that were not published stay pending.
	ErrUnavailable = errors.New("outbox: publisher unavailable")
	// ErrNotParked is returned by [Relay.Requeue] when the ID names no
	// parked event.
	ErrNotParked = errors.New("outbox: no such parked event")
	// ErrRunning is returned by [Relay.Start] when the relay already runs.
	ErrRunning = errors.New("outbox: relay already running")
)
