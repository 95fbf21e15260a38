// Package rowsql is the SQL of resource rows ([store.Rows]), written once
// for every database of the store's drivers and parametrized by what each
// declares of its own ([Spelling]): the placeholders, whether it compiles
// every statement, how its "insert unless the key exists" treats other
// unique indexes, how its driver takes a UUID and reads one row, and its
// catalog. A driver package returns [New] of its spelling from its
// Rows method.
//
// The hottest statements run by plans made once per model type and table
// (store.RowsConfig.DisablePlans turns them off): a create's INSERT, and
// the read of a row by its key together with the database clock, which
// cost no gorm statement per request. A plan is only a faster way to send
// what gorm would send; a model whose statement gorm would write otherwise
// (hooks, database defaults, a spelling of its own) is written by gorm.
package rowsql
