// Package store opens the database behind a retrysafe service and is the one
// place where PostgreSQL and SQLite differ.
//
// [Open] takes a DSN: "sqlite:PATH" for the embedded default (pure Go, WAL
// mode, IMMEDIATE write transactions, busy timeout) or a postgres:// URL for
// production. The returned [DB] carries the [Dialect], the seam for row
// locks and lock timeouts, and [DB.Write], which runs a function in one
// transaction with the lock timeout applied.
//
// [Open] also sets PostgreSQL's connect, statement and idle-in-transaction
// timeouts (see [Config]) and installs [NewGormLogger], which logs failed
// and slow SQL without parameter values and renders nothing it does not
// log; use it for a *gorm.DB of your own too. [RedactError] renders a
// database error for a log line without the values it may quote.
//
// Errors that mean "the database is not there" (refused, starting up,
// shutting down, too many connections, a connect or statement timeout, a
// context deadline) are wrapped with [ErrUnavailable], and errors that mean
// "a concurrent transaction held the lock too long" with [ErrLockTimeout];
// the framework maps them to 503 unavailable and 409 request_in_progress.
package store
