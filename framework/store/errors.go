package store

import "errors"

var (
	// ErrUnavailable is returned (wrapped, by [Classify] and every method of
	// [DB]) when the database cannot be reached or refuses work for a reason
	// outside the request: connection refused or lost, server shutting down,
	// disk I/O failure. Nothing was committed; the request may be retried.
	ErrUnavailable = errors.New("store: database unavailable")

	// ErrLockTimeout is returned (wrapped) when a statement waited longer than
	// the configured lock timeout for a row or the database lock held by a
	// concurrent transaction. Nothing was committed.
	ErrLockTimeout = errors.New("store: lock timeout")

	// ErrMisconfigured is returned (wrapped, with what to change) by [New]
	// and [Open] when the database lacks something the framework cannot set
	// per transaction: SQLite not in WAL mode, a PostgreSQL server older
	// than [MinPostgresVersion], a gorm dialector other than PostgreSQL or
	// SQLite.
	ErrMisconfigured = errors.New("store: database not usable as configured")

	// ErrUnknownDSN is returned by [Open] for a DSN that is neither
	// "sqlite:PATH" nor a postgres:// URL.
	ErrUnknownDSN = errors.New("store: unknown DSN scheme (want sqlite:PATH or postgres://…)")
)
