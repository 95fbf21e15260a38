// Package recordsql is the SQL of the idempotency records
// ([store.Records]) written once: the statements as portable templates and
// the implementation that runs them, built by each driver package
// (storepg, storesqlite, storemysql) from its own [Spelling] with [New].
// The spellings (the clock, a time a duration from now, the next fencing
// token, an age in seconds), and the few statements a database spells
// otherwise (storemysql's claims), live in the driver of that database;
// this package holds none.
//
// A replay's one statement is the read of its record. It goes straight to
// the connection where the spelling says how ([Spelling].Numbered,
// [Spelling].Positional), scanned column by column instead of through
// gorm, and returns the database clock once beside the row; the record is
// judged on that clock in Go (expired, lease ended) with the comparisons
// the list statement makes in SQL, so the statement does not spell the
// clock again for each judgement. On SQLite, which compiles every
// statement, that was a quarter of a replay's CPU.
//
// [Respellable] is how storetest.ShiftRecordClock builds a test driver
// whose records read a shifted clock: it names this internal package's
// types, so no application can use it, and production statements take no
// clock argument.
package recordsql
