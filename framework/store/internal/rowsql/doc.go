// Package rowsql is the SQL of resource rows ([store.Rows]), written once
// for every database of the store's drivers and parametrized by what each
// declares of its own ([Spelling]): the placeholders, whether it compiles
// every statement, how its "insert unless the key exists" treats other
// unique indexes, how its driver takes a UUID and reads one row, and its
// catalog (the time columns' precision, a table's indexes). A driver
// package returns [New] of its spelling from its Rows method. The
// statements run on the application's models through gorm and gorm's
// public schema, never its statement or clause internals.
//
// The hottest statements run by plans made once per dialect, naming
// strategy, model type and table (store.RowsConfig.DisablePlans, the
// bench's -off row-plans, turns them off): a create's INSERT of the row
// and its child rows, queued for the transaction's next round trip where
// it pipelines and sent at once in the dialect's placeholders where it
// does not, and the read of a row by its key, which returns the database
// clock and the row in one statement (a miss too: the clock left-joined to
// the row), each column scanned through its field's value pool and setter
// as gorm's Take scans. Building them with gorm at each request cost about
// a sixth of a create's CPU, and on SQLite it was CPU spent holding the one
// write lock. A plan is only a faster way to send what gorm would send
// (TestInsertPlanSpellsGormsInsert, TestReadPlanReadsAsGormTakes compare
// them on every dialect): a model whose statement gorm would write
// otherwise (hooks, database defaults, auto-increment keys, create
// clauses, an AfterFind hook) is written and read by gorm. Where the
// driver compiles every statement (SQLite) the read is a plain WHERE on
// the key, with the clock read by a second statement after a miss.
//
// A read with child rows outside a transaction is one snapshot
// (store.ReadSnapshot); elsewhere (inside a transaction, a list page) the
// child rows are read with a second statement and the versions checked
// again, up to three times, after which the read fails with
// store.ErrChangedWhileRead rather than pair a version with another
// version's child rows.
package rowsql
