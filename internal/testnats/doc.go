// Package testnats gives tests a NATS JetStream server: the one at
// TEST_NATS_URL (default nats://127.0.0.1:4222), with a stream and subject
// prefix of their own, and a TCP proxy in front of it that a test can cut
// and restore to simulate an outage. A test that needs NATS skips when the
// server is unreachable, unless the CI variable is set: then it fails.
// [New] returns the [Server], with its [Proxy].
package testnats
