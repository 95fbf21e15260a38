// Package sandbox is a payment provider for tests and the demo: it assigns
// charge IDs ("ch_…") and keeps its ledger in the sandbox_charges table of
// the API's own database, so that every API process on that database sees
// one provider and its charges survive restarts.
//
// [Provider] implements [payments.Provider]. It deduplicates by
// (tenant, downstream key) with a UNIQUE constraint and
// INSERT … ON CONFLICT DO NOTHING: a second [Provider.Charge] with the same
// key returns the first charge, never a new one, however many callers race.
//
// The payment method decides the outcome:
//
//   - [payments.MethodCardVisa] succeeds.
//   - [payments.MethodCardDeclined] is declined ([payments.ChargeFailed],
//     [payments.FailureCardDeclined]); the decline is recorded, so a repeat
//     with the same key declines again.
//   - [payments.MethodCardTimeoutAfterCharge] succeeds, but the first answer
//     for its downstream key is lost: the call blocks until the caller's
//     context ends (or [Config.MaxHang]) and returns
//     [payments.ErrProviderTimeout] although the charge committed. The lost
//     answer is a column flipped by one UPDATE, so exactly one call loses it,
//     across processes and restarts. Later calls and [Provider.Lookup]
//     return the charge.
//
// [Provider.Mount] serves GET /sandbox/charges, the tenant's charges as
// [{"id":"ch_…","amount":…,"downstream_key":"…",…}], so that anyone can count
// real charges against logical payments.
package sandbox
