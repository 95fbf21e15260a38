// Command retrysafe is the operator's command for a database that the
// retrysafe framework writes to (any application's: PostgreSQL, MariaDB or
// MySQL, SQLite): what to do about a payment whose outcome is unknown, a
// key stuck in progress, an outbox event parked after its refusals,
// without SQL against the framework's tables.
//
//	retrysafe records list -state unknown -older-than 10m
//	retrysafe records show -tenant acme -operation payments.create -key K
//	retrysafe records resolve -tenant acme -operation payments.create -key K \
//	    -outcome succeeded -reference ch_123 -status 201 -body @payment.json -reason "INC-7: charge found"
//	retrysafe outbox list -parked | outbox requeue ID... | outbox requeue -all | outbox stats
//	retrysafe janitor run [-dry-run]
//	retrysafe migrate status | migrate up
//	retrysafe openapi
//
// Every command takes -db DSN ("sqlite:PATH", a postgres:// or a mysql://
// URL; DATABASE_URL when -db is absent), -json (output for scripts, and no
// progress bar), -timeout and -connect-timeout. It goes through the
// framework's storage seam (store.Open) and its library calls
// (postkeys.Resolve, postkeys.Cleanup, store.Records.List, outbox.ListParked,
// outbox.Requeue, outbox.ReadStats, migrations.Status): an application's
// own tooling calls the same functions.
//
// records list shows the SHA-256 of each key, not the key, unless
// -show-keys is given. records resolve takes the record over with the
// recovery worker's fenced transition (only while it is unknown, or in
// progress past its lease, on the database clock), completes it with the
// operator's answer and writes an audit row (actor: -actor, else $USER,
// else the operating system's user name; -reason) in one transaction; the
// client's next retry with the key replays that answer. A failed outcome
// names a final code: a generic one, or one the record's operation
// declared, as its service published it when it started
// (postkeys.Adapter.PublishOperations); a code of another operation is
// refused.
// openapi prints the demo's OpenAPI document (built on a scratch SQLite
// file; it needs no -db).
//
// A progress bar is drawn on stderr for janitor run and outbox requeue
// when stderr is a terminal and -json is not given.
//
// Exit codes: 0 done; 1 an unexpected failure; 2 a bad command, flag or
// argument (nothing done); 3 the database cannot be reached, does not
// exist on its server or refuses the login, or the SQLite file does not
// exist (nothing done, nothing created); 4 the framework's tables are
// missing or not migrated: run "retrysafe migrate up"; 5 no such record
// or parked event; 6 a live attempt holds the record's lease (or a lock):
// retry later; 7 the record is already completed, or another attempt took
// it first. docs/operator.md has the details.
package main
