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
// or a server other than MariaDB [MinMariaDBVersion]+ (MySQL 8 has no
// sequences and no INSERT … RETURNING, which the record store uses).
//
// A write transaction runs READ COMMITTED with its lock wait timeout and
// statement timeout set on the session for itself alone and the
// session's own values restored when it ends (or, sent whole in one
// statement, with SET STATEMENT … FOR and SET TRANSACTION, which leave
// the session as it was); a deadlock (1213) or a lock wait past the
// timeout (1205) is [store.ErrLockTimeout]. The database clock is
// UTC_TIMESTAMP(6).
//
// On a pool that takes several statements in one query with its
// placeholders filled in on the client (multiStatements=true and
// interpolateParams=true: [Driver.Open]'s pool, or an application's DSN
// that adds both), a write transaction pipelines as on PostgreSQL: its
// begin, the writes the framework queues (a new row, its child rows, the
// outbox event) and its COMMIT go out as one multi-statement query, so a
// PUT create is one round trip, and a transaction that wrote nothing
// sends nothing. MySQL stops such a query at its first failing
// statement; a mark set before each statement tells which one failed, so
// that its error is reported as that statement's. The transaction's
// statements in the COMMIT's query, START to COMMIT, go as one compound
// statement (BEGIN NOT ATOMIC … END), which MariaDB answers with one
// packet instead of one a statement; the statement timeout then bounds
// them together. A transaction of which nothing went out before its
// COMMIT (a create) is that one statement alone, its settings included:
//
//	SET STATEMENT innodb_lock_wait_timeout = 5, max_statement_time = 5 FOR
//	BEGIN NOT ATOMIC SET TRANSACTION ISOLATION LEVEL READ COMMITTED;
//	START TRANSACTION; …; COMMIT; END
//
// On any other pool each statement is a round trip of its own, with the
// same results.
//
// The package owns everything the framework does differently on the MySQL
// family: the spellings of the statements written once in the store (the
// resource rows' [Driver.Rows], the idempotency records', the outbox's),
// the error numbers ([Driver.Classify]), the transactions, and the
// framework's tables on it (migrations/, [Driver.Migrations]): DDL there
// commits by itself, so every statement of those files is safe to run
// again after a crash half-way, and migrators take turns on GET_LOCK.
package storemysql
