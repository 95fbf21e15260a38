// Package pipeline queues the writes of a store.DB.Write transaction whose
// answer nothing needs, so that they travel with the transaction's next
// statement (one round trip) on a driver that pipelines (storepg, and
// storemysql on a pool that batches): a driver's transaction connection
// implements [Tx]. On any other transaction each function runs its
// statement at once, through gorm, with the same result.
//
// [Later] queues a write that gorm builds, [LaterSQL] one spelled once in
// the driver's SQL (a resource row's INSERT plan, an outbox event) and
// [LaterExec] one with gorm's ? placeholders without building a gorm
// statement; their errors, wrapped as their statement wraps them, come
// back from the transaction's next statement or from store.DB.Write.
// [Exec] runs a statement at once, with what is queued before it. [Find]
// runs a query through the batch, so that a transaction whose first
// statement returns rows (the POST fallback's claim, INSERT … RETURNING)
// costs no round trip for its begin. A statement that returns columns into
// the model (gorm's RETURNING for database defaults) is never queued.
//
// It is the store's own: the drivers and the statements written once for
// them (rowsql, recordsql, outboxsql) queue their writes with it; an
// application reaches it only through those statements (store.Rows'
// Create, outbox.Append) and otherwise uses plain gorm on the transaction
// it is given, where a plain tx.Exec still travels with what is queued
// before it.
package pipeline
