package store

import (
	"errors"
	"fmt"
)

var (
	// ErrUnavailable is returned (wrapped, by [Classify] and every method of
	// [DB]) when the database cannot be reached or refuses work for a reason
	// outside the request: connection refused or lost, server shutting down,
	// disk I/O failure. Nothing was committed; the request may be retried.
	ErrUnavailable = errors.New("store: database unavailable")

	// ErrLockTimeout is returned (wrapped) when a statement waited longer than
	// the configured lock timeout for a row or the database lock held by a
	// concurrent transaction. Nothing was committed. The framework answers
	// it 503 unavailable with Retry-After, unless the lock was the
	// request's own key's ([ErrKeyLocked]).
	ErrLockTimeout = errors.New("store: lock timeout")

	// ErrBusy is returned (wrapped, beside [ErrLockTimeout]) when the lock
	// waited for covers more than rows: SQLite's database write lock,
	// which every write transaction takes, or a table lock on PostgreSQL
	// (LOCK TABLE, a migration's ALTER TABLE). Whatever the key of the
	// request that waited, the lock was not its key's alone.
	ErrBusy = errors.New("store: the database is busy")

	// ErrKeyLocked is returned (wrapped, beside [ErrLockTimeout]) by the
	// framework's statements on one key's own row (a resource's row, an
	// idempotency record) when they waited past the lock timeout for a
	// lock on rows ([KeyLocked]): a concurrent request with the same key
	// holds it. The framework answers it 409 request_in_progress, the one
	// lock timeout it does.
	ErrKeyLocked = errors.New("store: a concurrent transaction holds the key's row")

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

	// ErrChangedWhileRead is returned by [Rows.Read] and [Rows.List] when a
	// row and its child rows, read apart, kept changing while they were
	// read: a read never pairs a version with another version's child
	// rows. The framework answers it 409 request_in_progress, which a
	// client retries.
	ErrChangedWhileRead = errors.New("store: the rows kept changing while they were read")

	// ErrVacuumRefused is returned by [Outbox.Vacuum] when the database
	// user may not vacuum outbox_events (on PostgreSQL only the table's
	// or the database's owner may).
	ErrVacuumRefused = errors.New("store: vacuum of outbox_events refused")
)

// KeyLocked returns err, the classified error ([DB.Classify]) of a
// statement on one key's own row, wrapped with [ErrKeyLocked] when it is a
// wait past the lock timeout for a lock on rows ([ErrLockTimeout] and not
// [ErrBusy]); any other error unchanged. Such a statement waits only for
// a transaction that holds that row, or inserts the same key: a
// concurrent request with the key. On the MySQL family, whose lock wait
// timeout does not say which lock it waited for, a gap lock that a
// transaction of the application's own took under REPEATABLE READ counts
// too (the framework's own transactions run READ COMMITTED and take
// none).
func KeyLocked(err error) error {
	if errors.Is(err, ErrLockTimeout) && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrKeyLocked) {
		return fmt.Errorf("%w: %w", ErrKeyLocked, err)
	}
	return err
}
