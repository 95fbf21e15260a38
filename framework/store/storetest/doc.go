// Package storetest is the contract suite of a [store.Driver]: what every
// database family must do for the framework, run against a real database.
// Each driver package runs it from its own tests with a [Harness] (a new
// database per test, the application's own gorm handle, and the few facts
// the suite cannot ask: whether the database runs in the process, a query
// it refuses):
//
//	func TestContract(t *testing.T) {
//		storetest.Exercise(t, storetest.Harness{Name: "postgres", DSN: …, Gorm: …})
//	}
//
// [Exercise] runs a file per concern: write.go (transactions, lock
// timeouts, cancellation), errors.go (the sentinel errors of Classify on
// real duplicate keys and hostile text), clock.go (the database clock and
// the store's estimate of it), snapshot.go (snapshot reads), pipeline.go
// (writes queued for the next round trip), tracing.go (redacted SQL
// spans), migrations.go (the driver's migrations, [store.DB.Migrate]), and
// the statement families the framework owns on every database: rows.go
// (the resource rows, [store.Rows], through store.Open, on the
// application's own handle and with the plans off), records.go (the
// idempotency records, [store.Records]) and outbox.go (the outbox's
// statements, [store.Outbox]: numbering per aggregate, the claim's order
// and backoff, disjoint claims by two relays where the claim locks,
// settle, park and requeue, the backlog). A new driver is judged by this
// suite alone, and the suite imports nothing above framework/store, so it
// cannot lean on the patterns built on the store. The PostgreSQL and
// MariaDB runs need TEST_DATABASE_URL and TEST_MYSQL_URL; under CI they are
// set, so nothing skips there.
//
// Two helpers serve tests beyond the suite: [CheckTable] checks a resource
// table of the application's (the system columns, the list index and the
// indexes it names in [TableCheck]), and [ShiftRecordClock] moves the
// database clock as the idempotency records' statements read it, so that
// a test ends a lease or a replay window without sleeping and without a
// test parameter in production SQL.
package storetest
