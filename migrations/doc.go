// Package migrations applies the framework's own tables (the POST
// fallback's idempotency records, its operators' resolutions and its
// operations' published codes; the outbox and the consumer inbox) and an
// application's own, on a store's database.
//
// [Up] applies the framework's tables and nothing else: an application
// calls it at start-up next to its own migrations and gets no demo or
// example table. Their files are the driver's (each driver package under
// framework/store carries its database's, store.Driver.Migrations), and
// their versions are kept in their own goose table ([VersionTable]), so
// they never mix with the application's.
//
// [Apply] is the same machinery for an application's own embedded source,
// one folder per database named after its driver (postgres/, sqlite/,
// mysql/: store.Driver.Name), as the example resources' tables in
// resources/schema are. Up and Apply are idempotent: every process may
// call them at start, and concurrent starts take turns on the driver's
// lock (an advisory lock on PostgreSQL, GET_LOCK on the MySQL family).
// [Status] reads which of the framework's migrations are applied and
// changes nothing (the retrysafe command's "migrate status"). Nothing
// here depends on which database the store is on: what differs (goose's
// dialect, the lock, whether DDL is transactional) the driver declares,
// and [store.DB.Migrate] runs goose with it.
//
// A new migration is a file per driver with the same number, so that
// every store always has the same tables. Where DDL is not transactional
// (the MySQL family) each statement of a migration must be safe to run
// again after a crash half-way (IF NOT EXISTS, IF EXISTS), as its first
// file says.
package migrations
