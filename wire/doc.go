// Package wire is the HTTP contract of a retrysafe API in one place, with no
// dependency beyond the standard library: the server side (framework,
// fallback/postkeys) and the Go client both import it, so a service that
// only calls a retrysafe API never pulls in gin, gorm or a database driver.
//
// It holds:
//   - the header names of the contract ([HeaderIdempotencyKey],
//     [HeaderIdempotentReplayed], [HeaderRetryAfter], …);
//   - the generic problem codes ([Code]) with their HTTP status, title and
//     whether a retry with the same ID or key may succeed ([CodeInfo],
//     [Generic], [LookupGeneric]). Business codes (a payment's
//     card_declined) are not here: each resource registers its own with the
//     server's engine, and a client treats a code it does not know by its
//     HTTP status and Retry-After;
//   - the idempotency key syntax ([ParseKey], [UnquoteKey], [ValidateKey]);
//   - the RFC 9457 problem body ([Problem], [ParseProblem]).
//
// The server's rule that exactly the retryable answers carry Retry-After
// is what lets a client judge a code it does not know. A test
// (boundary_test.go) runs go list -deps to keep this package on the
// standard library and package client on this one.
package wire
