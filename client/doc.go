// Package client calls a retrysafe API and retries its writes safely.
//
// It depends only on the wire contract (net/http and
// github.com/google/uuid), never on the server framework, so a service that
// merely calls a retrysafe API does not pull in gin or gorm.
//
// # Two patterns
//
// [Client.Create] uses the preferred PUT pattern: the resource ID is chosen
// once (by the caller or generated, UUIDv7 by default) and every attempt
// sends PUT {collection}/{id} with "If-None-Match: *". A 201, fresh or
// replayed ("Idempotent-Replayed: true"), is success; [Result.Replayed]
// tells which.
//
// [Client.Post] uses the POST fallback: an Idempotency-Key is generated once
// per logical operation and sent on every attempt, so the server executes
// the operation once and replays its stored answer (201, or a stored
// rejection such as 402 card_declined) to every retry.
//
// # Reading, replacing, deleting
//
// [Client.Get] reads a resource, [Client.List] walks a collection page by
// page (following next_cursor), [Client.Replace] sends a PUT with
// If-Match and [Client.Delete] a DELETE with If-Match, all retried by the
// same table. A Delete whose earlier attempt lost its answer and whose
// retry finds the resource gone (404/410) succeeds; a conditional Replace
// whose retry gets 412 after a lost answer reports the outcome as unknown,
// since the lost attempt may have moved the ETag on.
//
// Request structs take either Body (JSON bytes) or Value (marshalled once
// with encoding/json); [Decode] unmarshals a Result's body into a typed
// representation and [ProblemOf] returns the problem of a failed call.
//
// # Retries
//
// [ClassifyAnswer] is the single retry decision table, built on the wire
// contract of package wire (codes, their statuses and retryability). Network
// errors, timeouts, 408, 425, 429, 500, 502, 503, 504 and 409
// request_in_progress or outcome_pending are retried with the same ID or
// key; 401 calls [Config.RefreshTokenFunc] once and retries; every other
// answer (400, 402, 404, 409 resource_locked, 410, 412, 413, 415, 422, …)
// is final. A code the contract does not define (a service's own business
// code) is judged by its status and Retry-After: the server sends
// Retry-After on exactly the answers that may be retried, so a 409 with it
// is retried and one without it is final. Waits grow
// exponentially with full jitter, honour Retry-After (delta-seconds or
// HTTP-date), and stop at [Config.MaxAttempts], [Config.MaxElapsed] or the
// context's deadline, whichever comes first; no wait outlives the context.
// The default caps (90 s, 50 tries) outlast a retrysafe server's default
// lease, so a retry takes over the work of an attempt that died instead of
// giving up while its key is held; [Config.MaxElapsed] says how to size
// them for another server.
// Request bodies are kept as bytes and re-sent unchanged.
//
// [Result.Attempts] and [Error.Attempts] count every request that went out,
// including the re-sends that net/http's transport makes on its own: it
// silently sends a request with an Idempotency-Key (or a GET) again on a
// new connection when a reused one broke before any answer. Such a re-send
// is safe for the same reason a retry is, and the client sees it through
// net/http/httptrace.
//
// # Errors
//
// Failures after the first attempt are [*Error] values carrying the last
// status, the problem code and detail ([Problem]), the attempts made and
// [Error.OutcomeKnown]. When the outcome is unknown the operation may or
// may not have taken effect: retry later with the same ID or key, never a
// new one. errors.Is(err, [ErrRetriesExhausted]) tells that the caps, not
// the server, ended the retries.
//
// # Surviving a restart
//
// With a [KeyStore] (for example [NewFileKeyStore]) and an Operation name
// on the request, the key or ID is persisted before the first request and
// reused by the next process that runs the same operation, which then gets
// the original result as a replay. Call [Client.Forget] once the outcome is
// known and recorded.
//
// The server forgets a key after its replay window (24 hours by default;
// [Config.ReplayWindow]). [Client.Post] does not send a stored key older
// than that, since the server would run the operation again: it returns a
// [*KeyExpiredError] ([ErrKeyExpired]), and the caller finds out whether
// the operation took effect before it Forgets the key. Resource IDs of
// [Client.Create] do not expire: a PUT with "If-None-Match: *" replays the
// creation for as long as the resource exists.
//
// Clock, sleep and randomness are injectable through [Config] (NowFunc,
// SleepFunc, RandFunc, RandReader) so that tests never sleep for real.
package client
