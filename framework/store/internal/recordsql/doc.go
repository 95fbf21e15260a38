// Package recordsql is the SQL of the idempotency records
// ([store.Records]) written once: the statements as portable templates and
// the implementation that runs them, built by each driver package
// (storepg, storesqlite, storemysql) from its own [Spelling] with [New].
// The spellings, and the few statements a database spells otherwise,
// live in the driver of that database; this package holds none.
package recordsql
