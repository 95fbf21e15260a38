package postkeys_test

import (
	"os/exec"
	"strings"
	"testing"
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
			strings.HasPrefix(dep, "github.com/jackc/"), strings.HasPrefix(dep, "github.com/glebarez/"):
			t.Errorf("fallback/postkeys depends on %s", dep)
		}
	}
	if !core {
		t.Fatal("fallback/postkeys does not list the core among its dependencies: go list gave something else")
	}
}
