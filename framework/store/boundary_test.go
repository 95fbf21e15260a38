package store_test

import (
	"os/exec"
	"strings"
	"testing"
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
