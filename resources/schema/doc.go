// Package schema holds the tables of the example resources and the demo
// (orders, transfers and accounts, payments, the sandbox provider's
// charges, the ledger), one embedded goose source per database, named
// after its driver (postgres/, sqlite/, mysql/), apart from the
// framework's own tables (package migrations).
//
// It is what an application does for its own tables: an embedded source
// applied with [migrations.Apply] under a version table of its own
// ([VersionTable]); [Up] applies it.
package schema
