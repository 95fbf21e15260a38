// Package rawhttp sends hand-written HTTP/1 requests over a TCP
// connection, for tests of what net/http's client never sends: a request
// framed two ways (request smuggling, [Smuggling]), a field sent twice.
// [Exchange] writes the raw bytes and reads every [Response] back.
package rawhttp
