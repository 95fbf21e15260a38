package sourcecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// NoSQL fails t for each string literal in the non-test Go files of the
// current directory (the package under test) that holds one of words, and
// for each call of X.Name() where X is a field or method named one of
// owners (for example "Driver", "Dialector"): such SQL and such choices
// belong to the drivers. It fails when it finds fewer than minFiles
// files, so that a test run from another directory cannot pass by
// reading nothing.
func NoSQL(t *testing.T, minFiles int, words, owners []string) {
	t.Helper()
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
				for _, w := range words {
					if strings.Contains(v, w) {
						t.Errorf("%s: SQL (%s): %.60q", fset.Position(n.Pos()), strings.TrimSpace(w), v)
					}
				}
			case *ast.SelectorExpr:
				if inner, ok := n.X.(*ast.SelectorExpr); ok && n.Sel.Name == "Name" {
					for _, o := range owners {
						if inner.Sel.Name == o {
							t.Errorf("%s: reads %s.Name(): a spelling per database belongs to its driver", fset.Position(n.Pos()), o)
						}
					}
				}
			}
			return true
		})
	}
	if checked < minFiles {
		t.Fatalf("checked %d files: the package's sources were not found", checked)
	}
}
