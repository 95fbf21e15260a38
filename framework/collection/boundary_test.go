package collection_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/sourcecheck"
)

// TestHoldsNoSQL fails when the package's code (its non-test files) holds
// SQL or picks anything by the database's name (Driver.Name(),
// Dialector.Name()): the statements on resource rows and their spellings
// are the store's (store.Rows), so that the PUT pattern keeps its
// decisions and a database is added without touching it.
func TestHoldsNoSQL(t *testing.T) {
	t.Parallel()
	sourcecheck.NoSQL(t, 12, []string{"SELECT ", "INSERT ", "UPDATE ", "DELETE ", " WHERE ", " IS NULL", " IN ?", "ON CONFLICT", "FOR UPDATE"},
		[]string{"Driver", "Dialector"})
}
