// Package store is the database behind a retrysafe service, and the seam
// between the framework and each database family: [Driver], implemented
// by one package per database beside this one (storepg for PostgreSQL
// through pgx, storemysql for MariaDB, storesqlite for the pure-Go
// SQLite), the only packages that import a database driver. This package
// imports none: an application imports the drivers it uses, and each
// registers itself ([Register]):
//
//	import (
//		"github.com/retrysafe/retrysafe/framework/store"
//		_ "github.com/retrysafe/retrysafe/framework/store/storepg"
//	)
//
// Bring your own connection: [New] wraps the application's existing
// *gorm.DB (gorm.io/driver/postgres, or github.com/glebarez/sqlite); the
// driver is the registered one of its dialector. The application keeps its
// pool, its DSN, its logger and its migrations:
//
//	gdb, err := gorm.Open(postgres.Open(os.Getenv("DATABASE_URL")), &gorm.Config{})
//	…
//	db, err := store.New(ctx, gdb, store.Config{})
//
// What the framework needs per transaction, [DB.Write] sets per
// transaction on a connection of that pool ([Driver.Begin]): on
// PostgreSQL BEGIN and the transaction-local (SET LOCAL) lock_timeout,
// statement_timeout and idle_in_transaction_session_timeout (it holds
// behind PgBouncer in transaction pooling), on SQLite the busy timeout and
// BEGIN IMMEDIATE. On PostgreSQL a transaction pipelines through pgx: the
// begin travels in one round trip with the transaction's first statement,
// and the framework's writes whose answer nothing needs with the next
// statement or with COMMIT. [ReadSnapshot] reads several queries in one
// snapshot (one round trip on PostgreSQL). What the driver cannot set, New
// checks once ([Driver.Check]) and refuses with [ErrMisconfigured] and what
// to change: SQLite must be in WAL mode, PostgreSQL at least 12.
//
// [Open] is a convenience on top: it takes a DSN, "sqlite:PATH" for the
// embedded default (pure Go, WAL mode), a postgres:// or a mysql:// URL
// (MariaDB, MySQL), opens a pool
// through the registered driver of its scheme with a connect timeout and
// calls New. It installs [NewGormLogger], which logs failed and slow SQL
// without parameter values and renders nothing it does not log; use it for
// a *gorm.DB of your own too (gorm.Config{Logger: store.NewGormLogger(…)}).
// Whatever gorm logger a handle given to New has, the statements run on
// [DB.Gorm] reach it without their parameter values, with their errors
// redacted, and a unique index's refusal, which the framework expects
// (a retried create), not as an error. [RedactError] renders a database
// error for a log line without the values it may quote. With [Config.TracerProvider],
// each [DB.Write] is a "store.write" span and Open's pool traces every SQL
// statement and pgx batch (otelpgx, otelsql) with its text and without its
// parameter values.
//
// The returned [DB] carries the [Driver] (row locks, the clock, the
// idempotency records' statements in its spelling, [Records]) and
// [DB.Write], which runs a function in one transaction; pass its *gorm.DB
// to every transactional twin so that their writes commit together.
// Errors are classified by the driver ([DB.Classify]): "the database is not
// there" (refused, starting up, shutting down, too many connections, a
// connect or statement timeout, a context deadline) is [ErrUnavailable],
// "a concurrent transaction held the lock too long" [ErrLockTimeout] (a
// lock wider than rows, SQLite's database lock or a table's, is
// [ErrBusy] too), a duplicate key [ErrUniqueViolation] and a text the
// database cannot store [ErrUnstorableText]; the framework maps them to
// 503 unavailable, 503 unavailable (409 request_in_progress for a wait on
// the request's own key's row, [ErrKeyLocked], which the statements on a
// key's row mark with [KeyLocked]) and 400 validation_failed.
//
// Every statement on resource rows, the tables of the PUT pattern, is the
// store's ([Rows], [DB.Rows]): one method and one parameter struct per
// statement, written once in the store's internal rowsql package and
// parametrized by what each driver declares of its database (its
// placeholders, how its "insert unless the key exists" treats other
// unique indexes, how it reads one row and takes a UUID, its catalog).
// Package framework/collection keeps the PUT decisions and holds no SQL.
// The hot statements run by plans made once per model (a create's INSERT,
// the read of a row by its key with the database clock in one statement);
// [Config.DisableRowPlans] turns them off for the bench.
//
// Migrations are the driver's too: each driver package carries the
// framework's tables on its database as goose SQL files and declares what
// goose needs there ([Driver.Migrations]: goose's dialect, whether DDL is
// transactional, the lock concurrent migrators take turns on);
// [DB.Migrate] runs goose with it, for the framework's tables
// (migrations.Up) and an application's own (migrations.Apply), each in a
// version table of its own.
//
// The transactional outbox's statements are the driver's too
// ([Driver.Outbox], [Outbox]): one method and one parameter struct per
// statement, as in river's riverdriver. Package framework/outbox keeps the
// relay's algorithm and holds no SQL; what every database accepts is
// written once in the store's internal outboxsql package, which each
// driver embeds and adds to (on PostgreSQL one statement per event,
// queued for the COMMIT; a claim that locks its rows on PostgreSQL and
// MariaDB; the vacuum).
//
// A read replica ([Config.Replica], [Config.ReplicaDSN], or the replicas of
// gorm.io/plugin/dbresolver registered on the handle given to [New]) is
// [DB.Replica]: the framework reads it only where a lag cannot make an
// answer wrong (completed POST replays; GET, HEAD and list within the rules
// of docs/scaling.md, "Reads from replicas"), and under dbresolver pins
// every other read through [DB.Gorm] to the primary.
//
// The idempotency records' statements read the database clock as it is:
// no argument of theirs can move it. The framework's tests, which must end
// leases, replay windows and TTLs without sleeping, run them with a test
// driver instead: storetest.ShiftRecordClock replaces a DB's Driver by the
// same driver whose records spell the clock moved ahead by an argument the
// test controls. Each driver reaches it through an accessor of the
// store's internal recordsql package (its Respellable, which names
// internal types, so no application can use it); nothing else of the
// driver changes, and no Config carries a test clock. The choice keeps
// the production SQL free of a test parameter, and the test driver
// exercises the very templates production runs, with the clock spelled
// once more around them.
//
// The contract every driver passes is the suite in storetest;
// docs/design-notes.md ("The storage seam") says where each statement
// lives and how a database is added.
package store
