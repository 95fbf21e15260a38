// Package storemysql is the MySQL family's driver of the store
// ([store.Driver]) for MariaDB 10.7 and later, and the only package of the
// framework that imports gorm.io/driver/mysql and
// github.com/go-sql-driver/mysql. Import it where the application opens
// its database:
//
//	import _ "github.com/retrysafe/retrysafe/framework/store/storemysql"
//
//	db, err := store.Open(ctx, "mysql://app:secret@db:3306/shop", store.Config{})
//	// or, on the application's own handle (gorm.io/driver/mysql):
//	gdb, err := gorm.Open(mysql.Open("app:secret@tcp(db:3306)/shop?parseTime=true&charset=utf8mb4"), &gorm.Config{})
//	db, err := store.New(ctx, gdb, store.Config{})
//
// [Config] turns a mysql:// URL into the driver's configuration: times
// parsed in UTC, utf8mb4, a UTC session time zone and a strict sql_mode,
// whatever the URL says. [OpenDB] opens a database/sql pool on it for
// migrations and administration. [Driver.Check] refuses, with what to
// change, a handle without parseTime=true or utf8mb4, a session whose
// sql_mode is not strict, one that counts matched rows (clientFoundRows),
// MySQL itself, or MariaDB before [MinMariaDBVersion]
// (TestNewRefusesWhatItCannotServe). MySQL 8 has no sequences (the
// fencing tokens would need one counter row locked by every claim), no
// INSERT … RETURNING (each claim would need a read after its write) and no
// UUID type. docs/scaling.md ("The MySQL family") says what is supported
// in operation.
//
// The package owns everything the framework does differently on the MySQL
// family: the spellings of the statements written once in the store (the
// resource rows' [Driver.Rows], the idempotency records', the outbox's),
// the error numbers ([Driver.Classify]), the transactions, and the
// framework's tables on it (migrations/, [Driver.Migrations]).
//
// # Transactions on a pooled session
//
// InnoDB's default REPEATABLE READ takes gap locks: two transactions that
// look for absent neighbouring keys with a locking read and then insert
// them wait for each other. So every write transaction runs READ
// COMMITTED (TestNeighbouringInsertsDoNotWait); snapshot reads run START
// TRANSACTION WITH CONSISTENT SNAPSHOT, READ ONLY. The isolation level,
// innodb_lock_wait_timeout and max_statement_time are session variables:
// the transaction's first statement saves the session's values in user
// variables and sets its own in the same SET (evaluated left to right),
// and the end of the transaction puts them back after COMMIT or ROLLBACK;
// a connection they cannot be restored on is discarded
// (TestTransactionSettingsAreItsOwn). Lock timeouts are whole seconds:
// innodb_lock_wait_timeout takes no fraction.
//
// A lock wait past the timeout (1205) is store.ErrLockTimeout; a deadlock
// (1213) is store.ErrLockTimeout and store.ErrRolledBack, as PostgreSQL's
// 40P01 is. A deadlock rolls the whole transaction back on the server,
// after which MySQL would run the next statements in autocommit, so the
// transaction sends nothing more after one; because nothing of it
// committed, store.DB.WriteRetrying runs it again, which the POST fallback
// does for every transaction whose effects are all in the database.
//
// # Batching
//
// go-sql-driver has no pipeline, but a pool with multiStatements=true and
// interpolateParams=true ([Driver.Open]'s; Check probes an application's
// pool with DO ?; DO ? and returns a driver bound to what it found) takes
// several statements in one query. There the transaction's save-and-set
// SET and START TRANSACTION are queued, the writes the framework queues
// wait with them, and everything goes out with the next statement or with
// COMMIT and the restoring SET, as one query: a PUT create is one round
// trip (it was fourteen: a prepare and an execute a statement), and a
// transaction that wrote nothing sends nothing
// (TestABatchedWriteIsOneRoundTrip). On any other pool each statement is a
// round trip of its own, with the same results.
//
// MySQL stops a multi-statement query at its first failing statement and
// reports its error without saying which statement it was, and the
// framework must know: a failed COMMIT leaves the outcome unknown, a
// failed statement before it rolls back, and only the row's own duplicate
// key means "the ID is taken". So each statement is marked (SET
// @retrysafe_at = n, or the assignment carried in the statement's first
// value where MariaDB evaluates it before it writes the row, as the
// outbox's counter and event do), and a failure the server reported reads
// the mark back, with @@in_transaction for the COMMIT, which carries none.
// A failure read while the session is in no transaction is the COMMIT's,
// or a partial commit (DDL commits what ran before it), and is read as
// unknown; marks are numbered per batch across the process, so a mark an
// earlier batch left on the session is never read as this one's. Any
// error that is not the server's answer (a context that ended, a broken
// connection) leaves what ran unknown and discards the connection
// (TestABatchedFailureIsItsStatements,
// TestABatchedFailureAfterTheTransactionEndedIsUnknown,
// TestTheFirstWriteAfterTheBeginIsReadAsItsOwn).
//
// MariaDB answers a multi-statement query with one OK packet a statement,
// each flushed on its own. So the COMMIT's round trip sends the
// transaction, START to COMMIT, as one compound statement (BEGIN NOT
// ATOMIC … END), answered with one packet; its max_statement_time bounds
// it as a whole. A transaction of which nothing went out before its
// COMMIT (a create) is that one statement alone, its settings included,
// and nothing is saved or restored (TestAWriteIsOneStatement,
// TestAWholeTransactionSetsItsSettingsForItselfAlone):
//
//	SET STATEMENT innodb_lock_wait_timeout = 5, max_statement_time = 5 FOR
//	BEGIN NOT ATOMIC SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
//	START TRANSACTION; …; COMMIT; END
//
// Only writes, marks, savepoints, the SET TRANSACTION, the START and the
// COMMIT go in it; a batch holding anything else (DDL, a query's rows)
// goes as separate statements. With multiStatements=true a value spliced
// into SQL text by hand could carry a second statement: the framework
// only uses placeholders, which go-sql-driver quotes for utf8mb4, and an
// application that builds SQL text from input should not run it on the
// store's pool.
//
// # Creates, claims and fences
//
// No statement uses INSERT IGNORE, which turns every error of the
// statement (a truncated value, a NOT NULL) into a warning and stores what
// it can. A record claim is INSERT … SELECT … WHERE NOT EXISTS … RETURNING;
// a concurrent insert of the key that commits first makes it fail with
// 1062, read as "held", and InnoDB rolls back that statement alone. A
// resource row's "insert unless present" is gorm's ON DUPLICATE KEY UPDATE
// id = id, read by its affected rows (which is why clientFoundRows is
// refused). That upsert skips a conflict on any unique index, so the
// rows' spelling says so and the row statements look the key up after a
// skipped row: the key's own row means "exists", none means a resource's
// unique column refused it. A plain INSERT with the 1062 read instead
// would leave a shared lock on the row, and twenty concurrent PUTs of one
// resource deadlocked on the FOR UPDATE that follows; the upsert's
// exclusive lock makes them queue. The reclaim of an expired record is an
// ON DUPLICATE KEY UPDATE whose first assignment sets a fence drawn
// beforehand, only when the record may be reclaimed, and whose later ones
// apply only when the fence is the drawn one (MySQL evaluates them in
// order); the takeover is the fenced UPDATE, then the row read by its
// token (MariaDB has no UPDATE … RETURNING). Fencing tokens come from a
// sequence (NEXTVAL), never reused after a release, a reclaim or the
// janitor.
//
// # Clock, text and UUIDs
//
// The database clock is UTC_TIMESTAMP(6): NOW(6) follows the session's
// time zone. Columns are DATETIME(6) in UTC, and [Driver.Open] makes
// gorm's AutoMigrate write DATETIME(6), not its default of milliseconds.
// Text is utf8mb4 compared byte for byte (utf8mb4_nopad_bin: 'k', 'K' and
// 'k ' are three keys), and the strict sql_mode makes invalid UTF-8 (1366)
// and a too long value (1406) store.ErrUnstorableText, never a truncated
// row. A UUID is MariaDB's UUID type: 16 bytes stored and one value
// whatever its spelling, where CHAR(36) would make two values of two
// spellings and BINARY(16) would need every parameter converted.
//
// # Migrations
//
// DDL is not transactional: each statement of this package's migrations
// (and of every mysql/ folder of an application's) must be safe to run
// again after a crash half-way (IF NOT EXISTS, IF EXISTS, goose's NO
// TRANSACTION), and concurrent starts take turns on a GET_LOCK named after
// the version table. goose creates its version table and inserts the row
// of version 0 in one transaction, of which the CREATE TABLE is no part
// here; a process stopped between the two left a table on which goose
// refuses every later Up. So store.DB.Migrate, where the driver declares
// its DDL not transactional, writes the table and its row itself, under
// the same lock, before goose runs.
//
// # The outbox's relay
//
// The relay claims with FOR UPDATE SKIP LOCKED in a transaction held
// across the publish, as on PostgreSQL, so several relays run at once, but
// in two statements: one locks the candidates and returns their
// positions, the next reads the locked rows by primary key from a
// JSON_TABLE of the positions and keeps those behind no pending event of
// their aggregate left out of the claim. In one statement the look for an
// earlier event could run on a snapshot older than a row the scan then
// locked (InnoDB's plain reads see a snapshot, its locking reads the
// latest version), and MariaDB materialized the shared statement's CTE
// twice, with its payloads, in an on-disk table
// (TestAClaimLooksForEarlierEventsOnceItsLocksAreHeld). Both run without
// MariaDB's subquery cache, which only missed
// (TestTheClaimRunsWithoutTheSubqueryCache). A settled batch is one DELETE
// joined from a JSON_TABLE of its positions by primary key, queued for the
// COMMIT: MariaDB plans position IN (…) on a small table as a scan that
// locks every row it reads, so two relays waited for each other's events
// and a writer's, deadlocked, and published a batch again
// (TestSettlingWaitsForNoOtherEvent, TestASettledBatchIsOneDelete).
package storemysql
