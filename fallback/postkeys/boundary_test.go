package postkeys_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os/exec"
	"path/filepath"
	"strconv"
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

// TestHoldsNoRecordSQL fails when the package's code (its non-test files)
// holds SQL of the records' tables or picks anything by the database's
// name (Driver.Name()): the records' statements and their spellings are
// the drivers' (store.Driver.Records), so that a database is added
// without touching the adapter.
func TestHoldsNoRecordSQL(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BasicLit:
				if v, err := strconv.Unquote(n.Value); n.Kind == token.STRING && err == nil &&
					(strings.Contains(v, "idempotency_records") || strings.Contains(v, "idempotency_resolutions")) {
					t.Errorf("%s: SQL of the records' tables: %.60q", fset.Position(n.Pos()), v)
				}
			case *ast.SelectorExpr:
				if inner, ok := n.X.(*ast.SelectorExpr); ok && n.Sel.Name == "Name" && inner.Sel.Name == "Driver" {
					t.Errorf("%s: reads Driver.Name(): a spelling per database belongs to its driver", fset.Position(n.Pos()))
				}
			}
			return true
		})
	}
	if checked < 10 {
		t.Fatalf("checked %d files: the package's sources were not found", checked)
	}
}
