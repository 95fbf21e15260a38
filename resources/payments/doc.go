// Package payments is the example resource on the POST fallback in phased
// mode (fallback/postkeys): a payment whose charge ID is assigned by a third
// party, the [Provider].
//
//	POST /v1/payments      Idempotency-Key required; body [Command]
//	GET  /v1/payments/:id  the tenant's [Payment]
//
// A payment cannot run in one local transaction, because the charge happens
// at the provider. [Payments] therefore registers the operation
// [Operation] in [postkeys.Phased] mode and commits its work in atomic
// phases, each with a recovery point:
//
//  1. [PointCreated]: the pending payment row ("pay_…") and its downstream
//     key are committed before the provider is called, in the transaction
//     that claims the idempotency key ([postkeys.Operation.ClaimInFirstPhase]:
//     run builds the row in memory and does nothing else before it).
//  2. The provider charges with that downstream key, derived by
//     [postkeys.Run.DownstreamKey] from (tenant, operation, idempotency key,
//     "charge:" + payment ID): every attempt of one execution sends the same
//     key, so the provider deduplicates a repeated call; a new execution after
//     the key expired has a new payment and so a new charge. Before the call
//     the attempt makes sure its lease outlasts [Config.ProviderTimeout]
//     ([postkeys.Run.RenewFor]); right after step 1 it does, and no
//     statement is sent.
//  3. [PointCharged]: the charge ID and status, the outbox event and the
//     response (201 with the payment, or 402 card_declined, a business
//     rejection that is replayed for that key) are committed in one
//     transaction ([postkeys.Run.Complete]).
//
// On PostgreSQL a create therefore commits three transactions: steps 1 and
// 3 and the sandbox provider's own ledger write (a replay commits one).
//
// A provider call that outlives [Config.ProviderTimeout] (2s by default) may
// have charged: the record is left unknown and the client gets 409
// outcome_pending. The retry, or the recovery worker, runs the reconcile hook,
// which asks the provider for the payment's downstream key
// ([Provider.Lookup]) and completes the payment with the charge it finds; a
// charge the provider does not know is requested again under the same key.
// A call still running when the request deadline runs out answers 503
// unavailable, logged as the request deadline exceeded during the provider
// call (not as a database outage); the record stays in progress until its
// lease ends, and a retry or the recovery worker settles it the same way.
// An attempt that died between phases is resumed from its recovery point:
// one that died before step 1 committed left nothing behind, one that died
// before step 3 committed is at [PointCreated] and asks the provider again
// with the same downstream key.
// [FailPointAfterCharge] names the crash window between the provider's answer
// and the phase that records it, for the fault tests (internal/failpoint).
//
// The package root holds the domain: [Charge], [ChargeRequest], the
// [Provider] interface and its errors, and the payment methods the demo
// accepts. Package sandbox implements [Provider] with a ledger in the same
// database.
package payments
