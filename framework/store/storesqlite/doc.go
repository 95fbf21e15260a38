// Package storesqlite is the SQLite driver of the store ([store.Driver]),
// on the pure-Go github.com/glebarez/sqlite (no cgo): the embedded default,
// and the only package of the framework that imports a SQLite driver.
// Import it where the application opens its database:
//
//	import _ "github.com/retrysafe/retrysafe/framework/store/storesqlite"
//
//	db, err := store.Open(ctx, "sqlite:app.db", store.Config{})
//	// or, on the application's own handle (github.com/glebarez/sqlite):
//	db, err := store.New(ctx, gdb, store.Config{})
//
// The package owns everything the framework does differently on SQLite:
// the spellings of the statements written once in the store (the resource
// rows' [Driver.Rows], the idempotency records', the outbox's), the result
// codes ([Driver.Classify]), the clock's millisecond resolution, and the
// framework's tables on it (migrations/, [Driver.Migrations]).
//
// # One writer
//
// A write transaction sets PRAGMA busy_timeout to the store's lock timeout
// and takes the database's write lock up front (BEGIN IMMEDIATE), whatever
// _txlock the application chose, so that two writers never deadlock on a
// lock upgrade; the busy timeout stays on the connection, harmlessly. The
// database must be in WAL mode ([store.New] refuses it otherwise), so
// that readers never block the writer. A wait past the lock timeout is
// store.ErrLockTimeout and store.ErrBusy: the lock is the whole
// database's, never one key's, so the framework answers it 503
// unavailable, never 409 request_in_progress. Transactions do not
// pipeline (there is no round trip to save); the outbox's claim is a
// plain read settled in a short write afterwards, and one relay runs.
//
// # Compiling
//
// The driver compiles every statement on every execution, a prepared one
// too, and a create's throughput is the inverse of how long it holds the
// one write lock. So the spellings keep statements short: the read of a
// row by its key is a plain WHERE on the key, with the clock read by a
// second statement only after a miss (a replay runs one short statement),
// and an outbox event is written with two fixed statements (the
// aggregate counter's upsert, then the event) instead of a gorm statement
// built under the lock. A driver that keeps compiled statements
// (modernc.org/sqlite) registers the same database/sql name, so it cannot
// be linked beside the github.com/glebarez/sqlite an application brings:
// the framework stays on the application's driver.
//
// # The clock and fences
//
// The clock is SQLite's 'now', stored as fixed-width UTC text
// (YYYY-MM-DD HH:MM:SS.SSS) so that text order is time order; it reads in
// milliseconds ([Driver.ClockResolution]), so the store's clock estimates
// are truncated to milliseconds. Fencing tokens come from a one-row
// counter that the idempotency records' triggers advance in the claiming
// statement itself (SQLite has one writer at a time), so a token never
// repeats for a key.
package storesqlite
