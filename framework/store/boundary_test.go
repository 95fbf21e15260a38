package store_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/sourcecheck"
)

// driverModules are the database drivers: only the driver packages of
// the store import them.
var driverModules = []string{
	"github.com/jackc/", "github.com/lib/pq", "github.com/glebarez/", "modernc.org/sqlite",
	"github.com/mattn/go-sqlite3", "github.com/go-sql-driver/", "gorm.io/driver/",
}

// TestDriverBoundary fails when a package other than a store driver
// (framework/store/store…, the packages named after their database)
// imports a database driver, or when a package of the framework depends
// on one at all, even transitively: an application gets the drivers it
// imports and no other. Applications (cmd/, examples/) and the test
// helpers that start databases (internal/testdb, internal/pgtemp,
// internal/pgha, internal/galera) may
// import a gorm dialector of their own, as an application does, and the
// driver packages of the store.
func TestDriverBoundary(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}|{{join .Imports \" \"}}|{{join .Deps \" \"}}", "github.com/retrysafe/retrysafe/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/retrysafe/retrysafe/"
	isDriver := func(pkg string) bool {
		for _, m := range driverModules {
			if strings.HasPrefix(pkg, m) {
				return true
			}
		}
		return false
	}
	storeDriver := func(pkg string) bool {
		return strings.HasPrefix(pkg, module+"framework/store/store") && pkg != module+"framework/store/storetest"
	}
	application := func(pkg string) bool {
		for _, p := range []string{"cmd/", "examples/", "internal/testdb", "internal/pgtemp", "internal/pgha", "internal/galera", "internal/demoproc"} {
			if strings.HasPrefix(pkg, module+p) {
				return true
			}
		}
		return false
	}
	checked := 0
	for line := range strings.Lines(string(out)) {
		parts := strings.Split(strings.TrimSpace(line), "|")
		if len(parts) != 3 {
			continue
		}
		pkg, imports, deps := parts[0], strings.Fields(parts[1]), strings.Fields(parts[2])
		if storeDriver(pkg) || strings.HasPrefix(pkg, module+"cmd/bench") {
			// cmd/bench: its baselines are hand-written on the drivers, on purpose.
			continue
		}
		checked++
		for _, imp := range imports {
			if isDriver(imp) && !(application(pkg) && strings.HasPrefix(imp, "gorm.io/driver/") || application(pkg) && imp == "github.com/glebarez/sqlite") {
				t.Errorf("%s imports the database driver %s: only framework/store/store… may", pkg, imp)
			}
		}
		if application(pkg) {
			continue
		}
		for _, dep := range deps {
			if isDriver(dep) || storeDriver(dep) {
				t.Errorf("%s depends on %s: a package of the framework must leave the choice of drivers to the application", pkg, dep)
				break
			}
		}
	}
	if checked < 20 {
		t.Fatalf("checked %d packages: go list did not list the module", checked)
	}
}

// TestNoDatabaseBranchesOutsideTheStore fails when a non-test Go file of
// the module outside framework/store/... knows which database it runs
// on: a comparison or switch on Driver.Name() or Dialector.Name(), or on
// a literal database name ("postgres", "mysql", "sqlite", …), a table
// keyed by database names, a comparison with a database error code, or
// SQL that one database spells its own way (ON CONFLICT, ON DUPLICATE
// KEY, FOR UPDATE, a catalog, $1, …). What differs between databases is
// its driver's, so that a database is added by one package under
// framework/store and nothing else.
//
// What it allows, on purpose:
//   - reading Driver.Name() as a value: migrations.Apply takes the
//     application's own folder of each database by it (a lookup, not a
//     branch), and logs and spans carry it;
//   - an application choosing its own gorm dialector by its DSN's scheme
//     (the examples open their *gorm.DB so, as a service does);
//   - test files (a test may read a pg_ catalog where it must), and the
//     test helpers whose job is one database or the matrix of them:
//     internal/testdb (a fresh database of each kind per test),
//     internal/pgtemp, internal/pgha and internal/galera (they start
//     PostgreSQL, pg_auto_failover and a Galera cluster);
//   - cmd/bench, a module of its own whose baselines are hand-written on
//     each database on purpose;
//   - internal/sourcecheck, which holds the words this scan looks for.
func TestNoDatabaseBranchesOutsideTheStore(t *testing.T) {
	t.Parallel()
	allowed := map[string]bool{"framework/store": true, "internal/testdb": true, "internal/pgtemp": true,
		"internal/pgha": true, "internal/galera": true, "internal/sourcecheck": true}
	findings, err := sourcecheck.DatabaseBranches("../..", func(dir string) bool { return allowed[dir] })
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range findings {
		t.Errorf("%s: %s: what differs between databases belongs to their drivers (framework/store/store…)", f.Pos, f.What)
	}
}

// TestTheBranchScanSeesABranch: the scan of TestNoDatabaseBranchesOutsideTheStore
// finds each kind of branch it looks for, so that it cannot pass by
// recognizing nothing.
func TestTheBranchScanSeesABranch(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	src := `package p

func f(tx, db, err, pgErr any, dialect string) {
	_ = tx.Dialector.Name() == "mysql"
	switch db.Driver.Name() {
	}
	switch dialect {
	case "sqlite":
	}
	_ = map[string]int{"postgres": 1}
	_ = pgErr.Code == "23505"
	_ = err.Number == 1062
	_ = "INSERT INTO t VALUES (?) ON DUPLICATE KEY UPDATE v = v"
	_ = "SELECT * FROM t WHERE id = $1"
}
`
	if err := os.WriteFile(filepath.Join(dir, "p.go"), []byte(src), 0o600); err != nil {
		t.Fatal(err)
	}
	findings, err := sourcecheck.DatabaseBranches(dir, func(string) bool { return false })
	if err != nil {
		t.Fatal(err)
	}
	lines := map[string]bool{}
	for _, f := range findings {
		lines[strings.Split(f.Pos, ":")[1]] = true
	}
	for _, line := range []string{"4", "5", "8", "10", "11", "12", "13", "14"} {
		if !lines[line] {
			t.Errorf("line %s of the sample was not found; found %v", line, findings)
		}
	}
}
