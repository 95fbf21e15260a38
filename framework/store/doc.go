// Package store is the database behind a retrysafe service and the one
// place where PostgreSQL and SQLite differ.
//
// Bring your own connection: [New] wraps the application's existing
// *gorm.DB (gorm.io/driver/postgres, or github.com/glebarez/sqlite); the
// dialect is taken from its dialector. The application keeps its pool, its
// DSN, its logger and its migrations:
//
//	gdb, err := gorm.Open(postgres.Open(os.Getenv("DATABASE_URL")), &gorm.Config{})
//	…
//	db, err := store.New(ctx, gdb, store.Config{})
//
// What the framework needs per transaction, [DB.Write] sets per
// transaction on a connection of that pool: on PostgreSQL BEGIN and the
// transaction-local (SET LOCAL) lock_timeout, statement_timeout and
// idle_in_transaction_session_timeout (it holds behind PgBouncer in
// transaction pooling), on SQLite the busy timeout and BEGIN IMMEDIATE.
//
// On PostgreSQL a transaction of [DB.Write] pipelines through pgx: the
// begin is sent in the same batch (one network write, one round trip) as
// the transaction's first statement, and writes queued with [Later] (whose
// answer nothing needs: child rows, outbox events, savepoints) travel with
// the next statement or with COMMIT; [Find] runs a query (INSERT …
// RETURNING) with them in the same round trip. [ReadSnapshot] reads several queries
// in one round trip and one REPEATABLE READ snapshot (a row and its child
// rows). What it cannot set, New checks once and refuses with
// [ErrMisconfigured] and what to change: SQLite must be in WAL mode,
// PostgreSQL at least [MinPostgresVersion].
//
// [Open] is a convenience on top: it takes a DSN, "sqlite:PATH" for the
// embedded default (pure Go, WAL mode) or a postgres:// URL, opens a pool
// with a connect timeout and calls New. It installs [NewGormLogger], which
// logs failed and slow SQL without parameter values and renders nothing it
// does not log; use it for a *gorm.DB of your own too. [RedactError]
// renders a database error for a log line without the values it may quote.
// With [Config.TracerProvider], each [DB.Write] is a "store.write" span and
// Open's pool traces every SQL statement and pgx batch (otelpgx, otelsql)
// with its text and without its parameter values.
//
// The returned [DB] carries the [Dialect] (row locks) and [DB.Write],
// which runs a function in one transaction; pass its *gorm.DB to every
// transactional twin so that their writes commit together. Errors that
// mean "the database is not there" (refused, starting up, shutting down,
// too many connections, a connect or statement timeout, a context
// deadline) are wrapped with [ErrUnavailable], and errors that mean "a
// concurrent transaction held the lock too long" with [ErrLockTimeout]
// ([DB.Classify]); the framework maps them to 503 unavailable and 409
// request_in_progress.
package store
