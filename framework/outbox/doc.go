// Package outbox is the transactional outbox: events written in the same
// transaction as the effect they report, and a [Relay] that publishes them
// at least once, in order per aggregate, through a [Publisher].
//
// Emit with [Write] on the transaction of the effect, on the path where the
// effect happened (a PUT's insert or replace, a POST operation's completion
// or phase), never on a replay:
//
//	err := db.Write(ctx, func(tx *gorm.DB) error {
//		if err := tx.Create(&payment).Error; err != nil {
//			return err
//		}
//		ev, err := outbox.NewEvent(tenant, "payment.succeeded", "payment", payment.ID, payment)
//		if err != nil {
//			return err
//		}
//		_, err = outbox.Write(ctx, tx, ev)
//		return err
//	})
//
// Every event gets a UUID (the broker's and the consumer's deduplication
// ID), a sequence number per aggregate assigned under the aggregate's
// counter row lock (so sequence order is commit order), and the trace
// context of ctx. [AppendOrdered] is for events whose aggregate's own row
// the transaction has already written, and so locked: that lock orders
// them, and on PostgreSQL the event's position is its number (increasing,
// with gaps), with no counter row. The tables are the framework's
// (migrations 00002 and 00003).
//
// The relay ([NewRelay], [Relay.Start]) claims pending events in batches,
// publishes them and deletes them. On PostgreSQL and MariaDB several
// relays may run at once (FOR UPDATE SKIP LOCKED, each claim starting at
// an aggregate's earliest pending event); on SQLite one. A relay that dies between a
// publish and its delete publishes the event again later: publishers and
// consumers deduplicate by [Event.ID] (see package natsjs and package
// inbox). Refused events are retried with backoff and parked after
// [Config.MaxAttempts]; see [Relay] for what that means for the aggregate.
// On PostgreSQL the running relay also vacuums outbox_events every
// [Config.VacuumInterval], so that the rows it deletes do not pile up in
// front of every claim between autovacuum's visits.
// A published event is deleted in the transaction that settles its batch;
// with a positive [Config.Retention] it is moved to outbox_published
// instead and deleted from there that much later, in bounded batches.
// [Metrics] reports the lag and the counts on the registry passed in
// [Config.Registerer]. With [Config.TracerProvider] every publish is a
// producer span in the writing request's trace, and the event carries that
// span's context to the consumer.
//
// The package holds no SQL: every statement, and how it is spelled on
// each database, is the store driver's ([store.Outbox], from
// [store.Driver]'s Outbox), and the package never asks which database it
// runs on. It keeps the algorithm: batches, order per aggregate, backoff,
// parking, metrics, tracing.
//
// An operator's tooling needs no relay: [ListParked] lists the parked
// events, [Requeue] makes one pending again and [ReadStats] reads the
// backlog (the retrysafe command's "outbox" subcommands).
package outbox
