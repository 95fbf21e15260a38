package sourcecheck

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
)

// Finding is one place where code knows which database it runs on.
type Finding struct {
	// Pos is file:line:column, the file relative to the root scanned.
	Pos string
	// What says what was found.
	What string
}

// databaseNames are the names of database families and of their gorm
// dialectors and drivers.
var databaseNames = map[string]bool{"postgres": true, "postgresql": true, "pgx": true, "mysql": true, "mariadb": true,
	"sqlite": true, "sqlite3": true}

// spellings are SQL that one database family spells its own way, or that
// only some of them accept: in a string literal outside the store, a
// statement written for one database. They are matched as written (SQL's
// keywords in capitals, as this code writes them), so that a gorm tag
// (autoIncrement) is not taken for SQL.
var spellings = []string{"ON DUPLICATE KEY", "ON CONFLICT", "FOR UPDATE", "SKIP LOCKED", "INSERT IGNORE", "statement_timestamp",
	"UTC_TIMESTAMP", "strftime(", "pg_catalog", "pg_advisory", "pg_stat", "information_schema", "sqlite_master", "PRAGMA ",
	"GET_LOCK", "SET LOCAL", "AUTO_INCREMENT", "AUTOINCREMENT", "NEXTVAL", "nextval(", "LAST_INSERT_ID", "BEGIN IMMEDIATE", "::regclass",
	"to_regclass", "ILIKE", "GREATEST(", "IFNULL(", "DATETIME(", "TIMESTAMPTZ"}

// sqlStatement recognizes a string literal that holds a statement, for
// the spellings that are only SQL inside one ($1, ::type).
var sqlStatement = regexp.MustCompile(`(?i)\b(SELECT|INSERT|UPDATE|DELETE)\b`)

// numberedOrCast are PostgreSQL's numbered placeholders and casts.
var numberedOrCast = regexp.MustCompile(`\$[0-9]+|::[a-z]`)

// errorCode is a SQLSTATE (PostgreSQL, and the MySQL family's SQLSTATE).
var errorCode = regexp.MustCompile(`^[0-9][0-9A-Z]{4}$`)

// DatabaseBranches returns the places in the non-test Go files under root
// (skipping directories for which skip reports true, given their path
// relative to root with forward slashes, and every directory that holds a
// go.mod of its own) that branch on the database: a comparison or switch
// on a Driver's or Dialector's Name() or on a literal database name, a
// table keyed by database names, a comparison with a database error code
// (a SQLSTATE literal, or a number compared with a field named Number, as
// the MySQL driver's errors have it), or a string literal with SQL that
// one database spells its own way. The words it looks for are in this
// file: skip its directory.
func DatabaseBranches(root string, skip func(dir string) bool) ([]Finding, error) {
	var out []Finding
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			if rel == "." {
				return nil
			}
			name := d.Name()
			if strings.HasPrefix(name, ".") || name == "testdata" || name == "node_modules" || name == "vendor" || skip(rel) {
				return filepath.SkipDir
			}
			if _, err := os.Stat(filepath.Join(path, "go.mod")); err == nil {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		report := func(n ast.Node, what string) {
			p := fset.Position(n.Pos())
			out = append(out, Finding{Pos: rel + ":" + strconv.Itoa(p.Line) + ":" + strconv.Itoa(p.Column), What: what})
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.BinaryExpr:
				if n.Op == token.EQL || n.Op == token.NEQ {
					checkCompared(n.X, n.Y, report)
					checkCompared(n.Y, n.X, report)
				}
			case *ast.SwitchStmt:
				if n.Tag != nil && namesDatabase(n.Tag) {
					report(n, "a switch on the database's name")
				}
				for _, s := range n.Body.List {
					for _, e := range s.(*ast.CaseClause).List {
						if lit, ok := stringLit(e); ok && (databaseNames[strings.ToLower(lit)] || errorCode.MatchString(lit)) {
							report(e, "a case of the database: "+strconv.Quote(lit))
						}
					}
				}
			case *ast.KeyValueExpr:
				if lit, ok := stringLit(n.Key); ok && databaseNames[strings.ToLower(lit)] {
					report(n, "a table keyed by the database: "+strconv.Quote(lit))
				}
			case *ast.BasicLit:
				if v, ok := stringLit(n); ok {
					for _, s := range spellings {
						if strings.Contains(v, s) {
							report(n, "SQL of one database ("+s+"): "+quoteShort(v))
						}
					}
					if sqlStatement.MatchString(v) && numberedOrCast.MatchString(v) {
						report(n, "SQL of one database ($n or ::type): "+quoteShort(v))
					}
				}
			}
			return true
		})
		return nil
	})
	return out, err
}

// checkCompared reports x == y where x says which database it is.
func checkCompared(x, y ast.Expr, report func(ast.Node, string)) {
	if namesDatabase(x) {
		report(x, "a comparison with the database's name")
		return
	}
	lit, ok := stringLit(x)
	if ok && databaseNames[strings.ToLower(lit)] {
		report(x, "a comparison with a database's name: "+strconv.Quote(lit))
		return
	}
	if ok && errorCode.MatchString(lit) {
		report(x, "a comparison with a database error code: "+strconv.Quote(lit))
		return
	}
	if sel, isSel := y.(*ast.SelectorExpr); isSel && sel.Sel.Name == "Number" {
		if lit, isLit := x.(*ast.BasicLit); isLit && lit.Kind == token.INT {
			report(x, "a comparison with a database error number: "+lit.Value)
		}
	}
}

// namesDatabase reports whether e is X.Driver.Name() or X.Dialector.Name()
// (Driver or Dialector a field, a method or the expression itself).
func namesDatabase(e ast.Expr) bool {
	call, ok := e.(*ast.CallExpr)
	if !ok || len(call.Args) != 0 {
		return false
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Name" {
		return false
	}
	switch x := sel.X.(type) {
	case *ast.SelectorExpr:
		return x.Sel.Name == "Driver" || x.Sel.Name == "Dialector"
	case *ast.CallExpr:
		if s, ok := x.Fun.(*ast.SelectorExpr); ok {
			return s.Sel.Name == "Driver" || s.Sel.Name == "Dialector"
		}
	case *ast.Ident:
		return x.Name == "driver" || x.Name == "dialector"
	}
	return false
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	v, err := strconv.Unquote(lit.Value)
	return v, err == nil
}

func quoteShort(s string) string {
	if len(s) > 60 {
		s = s[:60] + "…"
	}
	return strconv.Quote(s)
}
