// Package faultproxy is a TCP proxy for fault tests: it stands between a
// client and a server (an HTTP client and the API, or the API and
// PostgreSQL) and injects the failures a real network has.
//
//   - [Proxy.Cut] closes the listener and every open connection, as a crash
//     or a refused connection would; [Proxy.Restore] listens again.
//   - [Proxy.Hold] stops forwarding bytes in both directions without closing
//     anything, as a silent partition does (packets dropped, nothing
//     refused); [Proxy.Release] lets the held bytes through again.
//   - With [Config.DropAnswerFunc] the proxy reads HTTP/1.1 exchanges: it
//     forwards each request, reads the server's whole answer (so the server
//     has finished, and committed, before the decision), records its bytes,
//     and either forwards them or closes the client's connection without a
//     byte: a lost response.
//
// It is a test helper: it favours simple, observable behaviour over speed.
package faultproxy
