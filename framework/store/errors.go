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

	// ErrRolledBack is returned (wrapped, beside [ErrLockTimeout]) when the
	// database rolled the whole transaction back to break a deadlock or a
	// serialization conflict with a concurrent transaction (PostgreSQL's
	// 40P01 and 40001, the MySQL family's 1213). Nothing of it committed,
	// and the same transaction may run again as it is: [DB.WriteRetrying]
	// does, for transactions that touch nothing outside the database.
	ErrRolledBack = errors.New("store: the database rolled the transaction back to resolve a conflict")

	// ErrUniqueViolation is returned (wrapped, by [Driver.Classify] and so
	// by [DB.Classify] and [DB.Write]) when a unique index or primary key
	// refused a row.
	ErrUniqueViolation = errors.New("store: a unique column already holds this value")

	// ErrUnstorableText is returned (wrapped, like [ErrUniqueViolation])
	// when the database refused a text value it cannot store (a NUL in
	// PostgreSQL text, a byte sequence that is not UTF-8).
	ErrUnstorableText = errors.New("store: a text value cannot be stored")

	// ErrMisconfigured is returned (wrapped, with what to change) by [New]
	// and [Open] when the database lacks something the framework cannot set
	// per transaction (SQLite not in WAL mode, a server too old), or no
	// registered [Driver] serves the gorm dialector.
	ErrMisconfigured = errors.New("store: database not usable as configured")

	// ErrUnknownDSN is returned (wrapped) by [Open] for a DSN whose scheme
	// no registered [Driver] takes, or that its driver cannot parse.
	ErrUnknownDSN = errors.New("store: unknown DSN")

	// ErrVacuumRefused is returned by [Outbox.Vacuum] when the database
	// user may not vacuum outbox_events (on PostgreSQL only the table's
	// or the database's owner may).
	ErrVacuumRefused = errors.New("store: vacuum of outbox_events refused")
)
