package postkeys_test

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/sourcecheck"
)

// TestImportsTheCoreNotThePUTEngine fails when the POST fallback depends,
// even transitively, on the PUT pattern (framework/collection) or on a
// database driver: it builds on the shared core alone.
func TestImportsTheCoreNotThePUTEngine(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-deps", "github.com/retrysafe/retrysafe/fallback/postkeys").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	core := false
	for dep := range strings.FieldsSeq(string(out)) {
		switch {
		case dep == "github.com/retrysafe/retrysafe/framework":
			core = true
		case strings.HasPrefix(dep, "github.com/retrysafe/retrysafe/framework/collection"),
			strings.HasPrefix(dep, "github.com/retrysafe/retrysafe/framework/store/store"),
			strings.HasPrefix(dep, "github.com/jackc/"), strings.HasPrefix(dep, "github.com/glebarez/"),
			strings.HasPrefix(dep, "github.com/go-sql-driver/"):
			t.Errorf("fallback/postkeys depends on %s", dep)
		}
	}
	if !core {
		t.Fatal("fallback/postkeys does not list the core among its dependencies: go list gave something else")
	}
}

// TestHoldsNoRecordSQL fails when the package's code (its non-test files)
// holds SQL of the records' tables or picks anything by the database's
// name (Driver.Name()): the records' statements and their spellings are
// the drivers' (store.Driver.Records), so that a database is added
// without touching the adapter.
func TestHoldsNoRecordSQL(t *testing.T) {
	t.Parallel()
	sourcecheck.NoSQL(t, 10, []string{"idempotency_records", "idempotency_resolutions", "idempotency_operations"}, []string{"Driver"})
}
