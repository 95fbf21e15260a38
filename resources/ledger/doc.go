// Package ledger is the demo's event consumer: every payment.succeeded
// event adds one entry to the tenant's ledger, however often the event is
// delivered, and GET /v1/ledger lists the entries.
//
// [Ledger.Handle] applies one event through the consumer inbox
// (framework/inbox): the entry and the inbox row of the event's ID commit
// together, so a redelivered or duplicated event is acknowledged without a
// second entry, and a failed one is rolled back and delivered again. It
// serves as a natsjs.Handler for a JetStream consumer, or is called in
// process by a relay without a broker.
package ledger
