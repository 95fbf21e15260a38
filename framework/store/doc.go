// Package store is the database behind a retrysafe service, and the seam
// between the framework and each database family: [Driver], implemented
// by one package per database beside this one (storepg for PostgreSQL
// through pgx, storemysql for MariaDB, storesqlite for the pure-Go
// SQLite), the only packages that import a database driver. This package
// imports none: an application imports the drivers it uses, as with
// database/sql, and each registers itself ([Register]):
//
//	import (
//		"github.com/retrysafe/retrysafe/framework/store"
//		_ "github.com/retrysafe/retrysafe/framework/store/storepg"
//	)
//
// So a PostgreSQL service does not download or build the SQLite driver,
// nor a SQLite one pgx, and no package of the framework depends on a
// database driver, even transitively (TestDriverBoundary). [New] finds
// the driver of a *gorm.DB by its dialector's name, [Open] by the DSN's
// scheme; a handle or DSN that no registered driver serves fails with
// [ErrMisconfigured] or [ErrUnknownDSN], naming the package to import.
//
// # Bring your own connection
//
// [New] wraps the application's existing *gorm.DB (gorm.io/driver/postgres,
// gorm.io/driver/mysql or github.com/glebarez/sqlite). The application
// keeps its pool, its DSN, its logger and its migrations: the framework
// owns no pool setting and needs no DSN parameter.
//
//	gdb, err := gorm.Open(postgres.Open(os.Getenv("DATABASE_URL")), &gorm.Config{})
//	…
//	db, err := store.New(ctx, gdb, store.Config{})
//
// [DB.Write] pins a connection of that pool and begins the transaction
// itself ([Driver.Begin]), with what the framework needs set for that
// transaction alone: on PostgreSQL BEGIN and the transaction-local
// lock_timeout, statement_timeout and idle_in_transaction_session_timeout
// (SET LOCAL, so they hold behind PgBouncer in transaction pooling and
// leave nothing on the server connection); on MariaDB READ COMMITTED and
// its own lock wait and statement timeouts, the session's values put back
// after; on SQLite the busy timeout and BEGIN IMMEDIATE. The *gorm.DB
// handed to the function is a gorm transaction to gorm (a nested
// Transaction is a savepoint); the function cannot commit or roll back
// itself, and a panic rolls back. Pass it to every transactional twin of
// the framework so that a resource row, its outbox event and an
// idempotency record commit together. What cannot be set per
// transaction, New checks once ([Driver.Check]) and refuses with
// [ErrMisconfigured] and what to change: SQLite must be in WAL mode (a
// property of the database file the framework does not change behind the
// application's back), PostgreSQL at least 12, MariaDB at least 10.7 with
// parseTime and utf8mb4.
//
// [Open] is a convenience on top: it takes a DSN, "sqlite:PATH" for the
// embedded default (pure Go, WAL mode), a postgres:// or a mysql:// URL,
// opens a pool through the registered driver of its scheme with a connect
// timeout and calls New. It installs [NewGormLogger], which logs failed
// and slow SQL without parameter values; use it for a *gorm.DB of your own
// too. Whatever gorm logger a handle given to New has, the statements run
// on [DB.Gorm] reach it without their values, with their errors redacted,
// and a unique index's refusal that the framework expects (a retried
// create) not as an error. [RedactError] renders a database error for a
// log line without the values it may quote. With [Config.TracerProvider]
// each [DB.Write] is a "store.write" span and Open's pool traces every
// statement and pgx batch with its text and without its values.
//
// # Errors
//
// Each driver's Classify turns its database's errors into the store's
// sentinels ([DB.Classify], [Classify] where no database is at hand): "the
// database is not there" (refused, starting up, shutting down, too many
// connections, a standby after a failover, a connect or statement timeout,
// a context deadline) is [ErrUnavailable]; "a concurrent transaction held
// the lock too long" [ErrLockTimeout], with [ErrBusy] where the lock
// covers more than rows (SQLite's database lock, a table lock); a
// duplicate key [ErrUniqueViolation]; a text the database cannot store
// [ErrUnstorableText]. Nothing outside a driver reads a SQLSTATE or an
// error number. The framework answers a lock timeout 503 unavailable,
// except where the statements on one key's own row (a resource row, an
// idempotency record) mark it as that key's ([KeyLocked], [ErrKeyLocked]):
// then it is 409 request_in_progress, because only then does a
// concurrent request with the same key hold the lock. Both carry
// Retry-After; anything unrecognised is a 500 whose cause is logged, never
// sent. A transaction that a deadlock rolled back committed nothing, so
// [DB.WriteRetrying] runs it again (three runs in all) where all of its
// effects are in the database.
//
// # The statement families
//
// Every statement the framework runs on its own tables, and on the
// application's resource rows, is a method of one of four interfaces with
// one parameter struct per statement, as in river's riverdriver, and the
// driver hands each out in its spelling:
//
//   - [Rows] ([DB.Rows], [Driver.Rows]): the resource rows of the PUT
//     pattern, on the application's models through gorm's public schema.
//     Package framework/collection keeps the decisions and holds no SQL.
//     The hottest statements run by plans made once per model type: a
//     create's INSERT, and the read of a row by its key with the database
//     clock in one statement; building them with gorm at each request
//     cost about a sixth of a create's CPU. [Config.DisableRowPlans] turns
//     the plans off for the bench.
//   - [Records] ([Driver.Records]): the idempotency records of the POST
//     fallback (claim, reclaim, get, takeover, the fenced writes, the
//     janitor's and the operator's), each with its guarantee in its doc
//     comment. Package fallback/postkeys calls them directly and holds no
//     SQL.
//   - [Outbox] ([Driver.Outbox]): the transactional outbox's claim,
//     settle, write, cleanup, requeue and backlog, and whether the claim
//     locks its rows (several relays at once) or is a plain read settled
//     afterwards (SQLite, one writer). Package framework/outbox keeps the
//     relay's algorithm and holds no SQL.
//   - [Migrations] ([Driver.Migrations]): the framework's tables as goose
//     files in the driver package, goose's dialect, whether DDL is
//     transactional, and the lock concurrent migrators take turns on.
//     [DB.Migrate] runs goose with it, for the framework's tables
//     (migrations.Up) and an application's own (migrations.Apply), each in
//     a version table of its own.
//
// The statements are written once, in the store's internal packages
// rowsql, recordsql and outboxsql, and parametrized by what each driver
// declares of its database: placeholders, the clock, a time a duration
// from now, the next fencing token, how its "insert unless present" treats
// other unique indexes, how its driver reads one row and takes a UUID, its
// catalog. Nothing is asked for by a type assertion: where a database does
// something better than the portable path, its driver says so in the
// spelling it builds a family with, and spells the few statements its
// database writes otherwise itself. A statement a driver runs for itself
// (BEGIN, set_config, PRAGMA busy_timeout, a snapshot's begin) lives in
// the driver too. No code outside framework/store/... branches on the
// database (TestNoDatabaseBranchesOutsideTheStore).
//
// # Round trips
//
// The round trip, not Go or SQL, is what a write mostly costs. So on a
// driver that pipelines (storepg; storemysql on a pool that takes several
// statements in one query) a transaction's begin waits and goes out with
// its first statement, and the writes whose answer nothing needs (a new
// row, its child rows, the outbox event, a savepoint) are queued by the
// store's internal pipeline package and travel with the next statement or
// with COMMIT: a PUT create is one round trip. Order is kept: any query
// first sends what is queued. On a transaction that does not pipeline
// each queued write runs at once, with the same result. [ReadSnapshot]
// reads several queries in one snapshot (one round trip on PostgreSQL), so
// a GET's row and child rows are of one version without a re-check.
//
// # The database clock
//
// Times that processes whose clocks disagree must judge alike (leases,
// replay windows, tombstone retention, the resource rows' stamps) are the
// database's ([Driver.Now], read into a [DatabaseTime]). A PUT create that
// inserts without reading first still needs that time before its batch
// leaves, so each [DB] keeps a [Clock] ([DB.Clock]): it keeps the database
// time the last reads returned, with the local instant each answer
// arrived, and estimates the clock as that time plus what elapsed since on
// the process's monotonic clock, never its wall clock (a process 745 hours
// ahead still stamps the database's time). The database evaluated its time
// before the answer arrived, so an estimate is never ahead of its clock,
// and behind it by at most the time that answer took, as a read-first's
// time is behind the commit it stamps. Of the readings of the last 100 ms
// the tightest is kept; past [Config.ClockMaxAge] (1s; negative keeps no
// estimate) without a reading there is no estimate and the write reads
// first. An estimate is truncated to the clock's resolution
// ([Driver.ClockResolution]: microseconds, milliseconds on SQLite), so no
// estimate is ahead of a reading taken after it and a replay renders the
// times the create rendered. The contract suite checks on each database
// that an estimate lies between the reading it was made from and a reading
// after it. After a failover the estimate is the old primary's clock for at
// most that second: creates there are stamped within the two servers'
// skew, as a read-first that raced the failover would be.
//
// The idempotency records' statements read the database clock as it is:
// no argument of theirs can move it. The framework's tests, which must end
// leases, replay windows and TTLs without sleeping, run them with a test
// driver instead: storetest.ShiftRecordClock replaces a DB's Driver by the
// same driver whose records spell the clock moved ahead by an argument the
// test controls. Each driver reaches it through an accessor of the
// internal recordsql package, so no application can use it, and no Config
// carries a test clock. The production SQL stays free of a test
// parameter, and the test driver exercises the very templates production
// runs, with the clock spelled once more around them.
//
// # Replicas
//
// A read replica ([Config.Replica], [Config.ReplicaDSN], or the replicas of
// gorm.io/plugin/dbresolver registered on the handle given to [New]) is
// [DB.Replica]: the framework reads it only where a lag cannot make an
// answer wrong (completed POST replays; GET, HEAD and list within the rules
// of docs/scaling.md, "Reads from replicas"), each read bounded by
// [Config.ReplicaTimeout] ([DB.ReadReplica]) after which the primary
// answers, and under dbresolver it pins every other read through [DB.Gorm]
// to the primary.
//
// # Adding a database
//
// A new database family is a package framework/store/store<name> that
// implements [Driver] (with a compile-time check, var _ store.Driver =
// Driver{}): its migrations as goose files in the package, its spelling of
// the resource rows' statements (built with rowsql.New), of the records'
// (recordsql.New), its outbox (embedding outboxsql.Statements), and a
// TestContract that passes storetest.Exercise, the one contract suite.
// Nothing outside the package changes. Then its DSN in internal/testdb, so
// that the per-database HTTP and fault tests run on it too, and a folder of
// its name in an application's own migration sources. The interface serves
// the framework's own packages and may gain methods in any release: a
// driver outside this repository is not supported.
package store
