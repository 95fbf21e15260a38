package storesqlite

import (
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/rowsql"
)

// Rows returns the resource rows' statements on SQLite. The driver
// (github.com/glebarez/go-sqlite) compiles a statement's text every time
// it runs it, a prepared one too, so the read of a row by its key is
// spelled as short as it can be. A time column keeps the text it is
// given, whole.
func (d Driver) Rows(cfg store.RowsConfig) store.Rows { return rowsql.New(d, rows, cfg) }

var rows = rowsql.Spelling{
	CompilesEachStatement: true,
	Indexes: `SELECT il.name AS idx, ii.name AS col FROM pragma_index_list(?) AS il, pragma_index_info(il.name) AS ii
ORDER BY il.name, ii.seqno`,
}
