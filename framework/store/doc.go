// Package store opens the database behind a retrysafe service and is the one
// place where PostgreSQL and SQLite differ.
//
// [Open] takes a DSN: "sqlite:PATH" for the embedded default (pure Go, WAL
// mode, IMMEDIATE write transactions, busy timeout) or a postgres:// URL for
// production. The returned [DB] carries the [Dialect], the seam for row
// locks and lock timeouts, and [DB.Write], which runs a function in one
// transaction with the lock timeout applied.
//
// Errors that mean "the database is not there" are wrapped with
// [ErrUnavailable] and errors that mean "a concurrent transaction held the
// lock too long" with [ErrLockTimeout]; the framework maps them to 503
// unavailable and 409 request_in_progress.
package store
