// Package retrysafetest holds what a service's tests need to put a
// retry-safe API under the faults a network has.
//
// [StartProxy] puts a [Proxy] in front of any TCP address (a client and
// the API, or the API and its database):
//
//   - [Proxy.Cut] closes the listener and every open connection, as a
//     crash or a refused connection would; [Proxy.Restore] listens again.
//   - [Proxy.Hold] stops forwarding bytes in both directions without
//     closing anything, as a silent partition does (packets dropped,
//     nothing refused); [Proxy.Release] lets the held bytes through again.
//   - With [ProxyConfig.DropAnswerFunc] the proxy reads HTTP/1.1
//     exchanges: it forwards each request, reads the server's whole answer
//     (so the server has finished, and committed, before the decision),
//     records its bytes, and either forwards them or closes the client's
//     connection without a byte: a lost answer. [ProxyConfig.StandInFunc]
//     answers in the server's place (a 503, a 409) without forwarding.
//
// It is a package for tests: it favours simple, observable behaviour over
// speed, and it imports package testing.
package retrysafetest
