package retrysafetest_test

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestExample runs the test of the package's example on every database
// configured.
func TestExample(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) { notesKeepTheirPromises(t, dsn) })
}
