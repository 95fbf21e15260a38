// Package retrysafetest is the test kit of retrysafe: it checks that a
// service's own write keeps the promises of a retry-safe API under the
// faults the framework's own suite uses, from a test of the service's
// suite. [Run] takes the service's http.Handler (or the URL of a running
// service), two tenants ([Tenant], [Bearer]), the write under test
// ([Operation]: its [Kind], its path with {id}, a valid body and another
// one) and [Config.CountFunc], which counts the write's effects for a
// tenant (rows, the sum of versions, events, charges). It runs one
// subtest per promise, so that a failure names the promise it broke:
//
//   - LostAnswer: the kit's [Proxy] lets the service answer the write,
//     then closes the client's connection without a byte of the answer,
//     as a network does after the commit; two retries get that answer
//     byte for byte (status, body, Content-Type, Location, ETag,
//     Idempotency-Key) with Idempotent-Replayed: true, and the write had
//     one effect.
//   - Concurrent: [Config.Concurrency] identical requests at once get one
//     answer, at once or after retrying a 409 request_in_progress or
//     outcome_pending, and the write had one effect.
//   - DifferentBody (PutCreateOnly, PostWithKey): the same ID or key with
//     [Operation.OtherBody] is 422 idempotency_key_reuse with no effect,
//     and the first body still replays.
//   - MemberNames: the body with a member name spelled another way
//     (another case, U+017F for s, U+212A for k, which Go's encoding/json
//     folds onto s and k), beside the right one or instead of it, or a
//     member given twice, is 400 and stores nothing: the valid body
//     afterwards is a first write, not a replay.
//   - OtherTenant: the second tenant's GET (and PATCH) of the first
//     tenant's resource is 404 with no effect, and its own write with the
//     same ID or key is a first write, its own, that leaves the first
//     tenant's answer as it was.
//   - ConditionalLostAnswer (PutCreateOrReplace, Patch): a replace or a
//     patch with If-Match whose answer was lost, retried with the same
//     If-Match (now stale), converges on that answer with one effect, and
//     a GET shows the ETag it made.
//
// A check the kind makes meaningless is skipped with the reason. The kit
// asserts on effects, not on statuses alone: a service that answers a
// retry with a perfect replay but wrote again fails LostAnswer on its
// count. The checks run one after another, each on resources of its own
// (a new UUID for {id}, a new key); nothing else may write for the two
// tenants while Run runs.
//
// How it sends: every request on a new connection, because Go's
// transport sends a request that carries an Idempotency-Key again by
// itself when a reused connection closes without an answer, which would
// hide a lost answer from the check; and a 409 that asks for a retry is
// retried after a few milliseconds rather than its Retry-After, until
// [Config.Timeout], so that a check waits for an event, not for the
// clock.
//
// The lost-answer proxy is public: [StartProxy] puts a [Proxy] in front
// of any TCP address (a client and the API, or the API and its database).
// With [ProxyConfig.DropAnswerFunc] it reads HTTP/1.1 exchanges: it
// forwards each request, reads the server's whole answer (so the server
// has finished, and committed, before the decision), and either forwards
// its bytes or closes the client's connection without a byte: a lost
// answer. [ProxyConfig.StandInFunc] answers in the server's place (a 503,
// a 409). [Proxy.Hold] stops forwarding without closing anything, as a
// silent partition does, until [Proxy.Release]; [Proxy.Cut] closes the
// listener and every connection, as a crash does, until [Proxy.Restore].
// It favours simple, observable behaviour over speed.
//
// The kit proves it can fail: its own tests plant defects in a service
// built on the framework (a retry that writes again, a replay that
// differs by one byte, member names matched as encoding/json matches
// them, a tenant served as another, a key that replays another body, a
// stale If-Match answered 412, two requests at once that both write) and
// check that the check guarding against each fails, saying why.
//
// It is a package for tests: it imports package testing, and no
// production package of the module may import it (a test of the module
// fails on one that does).
package retrysafetest
