package outbox_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestHoldsNoSQL fails when the package's code (its non-test files) holds
// SQL or picks anything by the database's name (Driver.Name(),
// Dialector.Name()): the outbox's statements and their spellings are the
// drivers' (store.Driver.Outbox), so that a database is added without
// touching the relay.
func TestHoldsNoSQL(t *testing.T) {
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
				v, err := strconv.Unquote(n.Value)
				if n.Kind != token.STRING || err != nil {
					break
				}
				for _, kw := range []string{"SELECT ", "INSERT ", "UPDATE ", "DELETE ", "VACUUM", " WHERE ", " IS NULL", " IN ?", "SET LOCAL"} {
					if strings.Contains(v, kw) {
						t.Errorf("%s: SQL (%s): %.60q", fset.Position(n.Pos()), strings.TrimSpace(kw), v)
					}
				}
			case *ast.SelectorExpr:
				if inner, ok := n.X.(*ast.SelectorExpr); ok && n.Sel.Name == "Name" && (inner.Sel.Name == "Driver" || inner.Sel.Name == "Dialector") {
					t.Errorf("%s: reads %s.Name(): a spelling per database belongs to its driver", fset.Position(n.Pos()), inner.Sel.Name)
				}
			}
			return true
		})
	}
	if checked < 8 {
		t.Fatalf("checked %d files: the package's sources were not found", checked)
	}
}
