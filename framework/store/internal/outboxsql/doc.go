// Package outboxsql is the SQL of the transactional outbox's statements
// ([store.Outbox]) that every database of the store's drivers accepts,
// written once: the claim around its locking clause ([ClaimHead],
// [ClaimTail], [Claim]), the settle, the event write through gorm with the
// aggregate counter's upsert, the cleanup of outbox_published, the
// requeue, the parked list and the backlog. A driver package embeds
// [Statements] in its own outbox type and adds what is its database's
// alone: whether and how the claim locks, a statement of its own where it
// is faster, and the vacuum.
//
// The claim takes a batch of pending events in order, each only when no
// earlier pending event of its aggregate is left out of the batch, so a
// relay publishes an aggregate's events in their order however many relays
// run. The look for an earlier event is skipped for an aggregate's first
// event (seq = 1), the event a create emits, which is most of them.
//
// What the drivers add: storepg writes an event in one statement (the
// counter's upsert feeding the insert in a data-modifying WITH, or an
// ordered event numbered by its position) queued for the transaction's
// COMMIT, settles a batch with two statements on ANY($1) queued for the
// COMMIT, sends SET LOCAL jit = off with the claim, and vacuums
// outbox_events after checking that the user owns it
// (store.ErrVacuumRefused otherwise). storemysql claims in two statements
// and deletes a settled batch in one (see its package doc); storesqlite
// claims without a lock, for one relay, and writes an event with two
// fixed statements.
package outboxsql
