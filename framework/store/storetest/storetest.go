package storetest

import (
	"context"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// Harness is how the suite gets databases of the driver under test.
type Harness struct {
	// Name is the driver's [store.Driver.Name].
	Name string
	// DSN returns the DSN ([store.Open]) of a new, empty database, removed
	// when tb ends.
	DSN func(tb testing.TB) string
	// Gorm returns a *gorm.DB on a new, empty database, opened the way an
	// application opens its own (its gorm dialector, none of
	// [store.Open]'s settings, but what [store.New] requires, such as WAL
	// on SQLite), closed when tb ends.
	Gorm func(tb testing.TB) *gorm.DB
	// Embedded is set for a database that runs in the process (SQLite):
	// its COMMIT runs to its end whatever the context, so a Write whose
	// context ends commits only what it acknowledges, and the suite can
	// afford many more transactions.
	Embedded bool
	// RefusedQuery is a query with one ? parameter that the database
	// refuses for a value that is not of its kind, and RefusalQuotes is
	// set when the refusal quotes that value (the case the SQL spans'
	// redaction is for).
	RefusedQuery  string
	RefusalQuotes bool
}

// Exercise runs the whole contract suite against h, each concern as a
// parallel subtest.
func Exercise(t *testing.T, h Harness) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(*testing.T, Harness)
	}{
		{"WriteOnOwnGormDB", testWriteOnOwnGormDB},
		{"LockTimeoutAndRollback", testLockTimeoutAndRollback},
		{"WriteUnderCancellation", testWriteUnderCancellation},
		{"Errors", testErrors},
		{"Clock", testClock},
		{"ClockEstimate", testClockEstimate},
		{"TimeColumns", testTimeColumns},
		{"Snapshot", testSnapshot},
		{"Later", testLater},
		{"ExecAndLaterExec", testExecAndLaterExec},
		{"QueryAfterAFailedWrite", testQueryAfterAFailedWrite},
		{"SQLSpansRedactErrors", testSQLSpansRedactErrors},
		{"Migrations", testMigrations},
		{"Rows", testRows},
		{"Records", testRecords},
		{"Outbox", testOutbox},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.run(t, h)
		})
	}
}

// open opens a store on a new database of h and closes it when t ends.
func open(t *testing.T, h Harness, cfg store.Config) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), h.DSN(t), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if db.Driver.Name() != h.Name {
		t.Fatalf("Open gave driver %q, want %q", db.Driver.Name(), h.Name)
	}
	return db
}
