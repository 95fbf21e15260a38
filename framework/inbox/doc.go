// Package inbox makes a message consumer's effect happen once per message,
// however often the message is delivered.
//
// [Inbox.Process] records (consumer, message ID) under a unique key in the
// same transaction as the consumer's own writes: the first delivery inserts
// the row and applies the effect, and they commit together; a redelivery or
// a duplicate finds the row, applies nothing and is acknowledged as done; a
// failure rolls back both, so the message is redelivered and applied then.
// Two deliveries at once serialize on the unique key: the second waits for
// the first to commit and is then a duplicate.
//
// Rows older than [Config.Retention] are deleted by [Inbox.CleanupOnce];
// keep the retention longer than the broker may redeliver a message.
package inbox
