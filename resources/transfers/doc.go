// Package transfers is the example of the POST fallback in local mode:
// ledger transfers between a tenant's accounts.
//
// POST /v1/transfers (Idempotency-Key required) moves Amount minor units
// from one account to another, creating accounts on first use with the
// transfer's currency. A balance moves by a relative update (balance =
// balance + ?), so without the key a retry would move it twice: the claim
// of the idempotency record, both balance updates, the transfer row and the
// record's completion commit in one transaction
// (fallback/postkeys, [postkeys.Local]). A transfer in another currency than
// an existing account's is 409 currency_mismatch, stored and replayed for
// its key. GET /v1/accounts/{name} returns an [Account].
//
// [New] registers the operation on a postkeys.Adapter; [Transfers.Mount]
// adds the routes. [Command] accepts any JSON spelling of an integer amount
// ([Command] Amount, a framework.Integer), so equal requests have equal fingerprints.
package transfers
