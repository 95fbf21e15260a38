// Package storepg is the PostgreSQL driver of the store ([store.Driver]),
// through pgx: the only package of the framework that imports pgx. Import
// it where the application opens its database:
//
//	import _ "github.com/retrysafe/retrysafe/framework/store/storepg"
//
//	db, err := store.Open(ctx, "postgres://…", store.Config{})
//	// or, on the application's own handle (gorm.io/driver/postgres):
//	db, err := store.New(ctx, gdb, store.Config{})
//
// The package owns everything the framework does differently on
// PostgreSQL ([MinVersion] and later): the spellings of the statements
// written once in the store (the resource rows' [Driver.Rows], the
// idempotency records', the outbox's), the SQLSTATEs ([Driver.Classify]),
// the pipelined transactions, and the framework's tables on it
// (migrations/, [Driver.Migrations], applied in transactions under an
// advisory lock).
//
// # Transactions
//
// A write transaction begins with BEGIN and set_config of lock_timeout,
// statement_timeout and idle_in_transaction_session_timeout, local to the
// transaction (SET LOCAL), spelled as one statement. They end with the
// transaction, so they hold behind PgBouncer in transaction pooling and
// leave nothing on the server connection. A COMMIT that PostgreSQL answers
// ROLLBACK (a failed statement whose error was ignored) is an error, as
// with database/sql's Tx.
//
// # Pipelining
//
// The round trip is what a create mostly costs: in profiles of the bench
// a quarter of the server's CPU was the write and read system calls of
// each statement. So the begin is not sent alone: it waits and goes out in
// one pgx batch with the transaction's first statement. Writes whose
// answer nothing needs travel with the next statement or with COMMIT: a
// new resource's row and its child rows (store.Rows Create and
// InsertChildren), outbox events, gorm's SAVEPOINT. A PUT create is then
// one round trip (begin, row, child rows, event, commit). Order is kept:
// any query first sends what is queued. A failed batch aborts the
// transaction; its error, wrapped as its statement wraps it (a child row's
// unique violation is still store.ErrUniqueViolation), is returned by the
// next statement or by store.DB.Write, which rolls back. A statement that
// would return columns into the model (gorm's RETURNING for database
// defaults) is never queued. A first statement that is a query (the POST
// fallback's claim, INSERT … RETURNING) runs through the batch too and is
// scanned by gorm, so it goes out with its transaction's BEGIN; other
// first queries (the SELECT … FOR UPDATE of a replace) send the begin
// alone before them.
//
// The first time a connection sends a statement in a batch, pgx prepares
// it in a round trip of its own before the batch. Were the begin in that
// batch, the prepare would run before BEGIN and outside the lock timeout
// (parsing an INSERT waits for a table that DDL holds): so a transaction
// remembers, with the connection, which statements it has sent there, and
// when its begin would travel with one it has not, the begin goes out
// alone first (TestLockTimeoutHoldsForAFreshStatement). That costs one
// round trip, once per statement per connection.
//
// # Reads
//
// A row read with its child rows outside a transaction (a GET, a replay
// after a replace) is one batch: BEGIN ISOLATION LEVEL REPEATABLE READ
// READ ONLY, the row, the child rows, COMMIT. The snapshot makes the child
// rows those of the version read without a version re-check (three round
// trips before, one now). The read of a row by its key, every PUT's
// read-first and a replay's only statement, runs through pgx itself on the
// pooled connection ([Driver.QueryRow]), which decodes each column into
// its destination, where database/sql would turn every column into a
// driver.Value first; a connection found broken before the statement went
// out falls back to database/sql, which retries on another. The ID goes
// out as a pgtype.UUID, which pgx encodes as 16 bytes on every connection
// (a uuid.UUID goes through its driver.Valuer, a string). A POST replay's
// record read takes the same path.
//
// # Failover
//
// A COMMIT whose wait for the synchronous standby is cancelled (an
// operator's pg_cancel_backend while the standby is down) has committed on
// this server only, and PostgreSQL answers it with success and a WARNING.
// The pools [store.Open] creates watch for that notice, and store.DB.Write
// answers such a commit store.ErrUnavailable instead of acknowledging a
// row a failover may lose; the client's retry converges on what did
// commit. statement_timeout does not cancel that wait: PostgreSQL disables
// it before it commits. A connection that meets 25006
// read_only_sql_transaction (a former primary that became a standby,
// behind a proxy or a DSN without target_session_attrs) is closed at once
// rather than reused, and with target_session_attrs=read-write (or
// primary) in the DSN, a connection whose server reports that it has
// become read-only or a standby is dropped, so the next write opens a new
// one (TestCommitNotConfirmedByTheStandbyIsNotAcknowledged,
// TestAStandbysRefusalClosesTheConnection, TestReadOnlyServer). An
// application that opens its own pool calls [WatchReplication] on its pgx
// configuration first. docs/scaling.md says how to run a primary with a
// synchronous standby.
//
// # Errors
//
// [Driver.Classify] reads 55P03, 40001 and 40P01 as store.ErrLockTimeout
// (with store.ErrBusy for a 55P03 whose context names no tuple: a table
// lock), class 08, 53 and 57P0x, 25006 and a refused or lost connection as
// store.ErrUnavailable, 23505 as store.ErrUniqueViolation, and 22021 and
// 22P05 (a NUL or an invalid byte in text) as store.ErrUnstorableText.
package storepg
