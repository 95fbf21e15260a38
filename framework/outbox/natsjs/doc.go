// Package natsjs connects the outbox to NATS JetStream: a [Publisher] for
// the relay and [Consume], a durable consumer with explicit acks for the
// other side.
//
// The publisher sends each event to subject
// "<prefix>.<tenant>.<event type>" (prefix "retrysafe" by default) with
// Nats-Msg-Id set to the event's ID, so that the stream drops a repeat
// within its duplicate window (a relay that died between publishing and
// marking publishes again), and creates the stream when it is absent. The
// event's fields travel as Retrysafe-* headers and its trace context as
// W3C traceparent / tracestate headers.
//
// [Consume] creates the stream too when it starts before the first publish,
// with the same definition (one function builds it for both), decodes
// messages back into events ([outbox.Event]), runs the handler in
// a consumer span linked to the span of the request that wrote the event,
// acks on success and naks (with a delay) on failure, so the message is
// redelivered. Pair it with package inbox so that a redelivery has no
// second effect.
package natsjs
