package outbox_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/sourcecheck"
)

// TestHoldsNoSQL fails when the package's code (its non-test files) holds
// SQL or picks anything by the database's name (Driver.Name(),
// Dialector.Name()): the outbox's statements and their spellings are the
// drivers' (store.Driver.Outbox), so that a database is added without
// touching the relay.
func TestHoldsNoSQL(t *testing.T) {
	t.Parallel()
	sourcecheck.NoSQL(t, 8, []string{"SELECT ", "INSERT ", "UPDATE ", "DELETE ", "VACUUM", " WHERE ", " IS NULL", " IN ?", "SET LOCAL"},
		[]string{"Driver", "Dialector"})
}
