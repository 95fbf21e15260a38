// Package app wires the retrysafe demo: the database, migrations, the
// engine, the example resources, metrics and the HTTP router. cmd/demo runs
// it as a process; the black-box tests in tests/ serve its [App.Handler].
//
// [New] is [Open] (the database, migrated) then [NewOn] (everything built
// on it), so that a test can shift the store's clock in between; [Config]
// holds what cmd/demo's flags set, [Events] the outbox relay and the
// ledger's consumer, and [DefaultTokens] the demo's bearer tokens.
package app
