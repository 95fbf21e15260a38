package retrysafetest_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestNoProductionPackageDependsOnTesting fails when a package of the
// module that is not a test kit depends on package testing, even
// transitively: the test kits (framework/retrysafetest,
// framework/store/storetest) and the test helpers under internal/ may; a
// service's production code, which imports the framework, must not get
// them, so no package of the framework, the demo or the examples imports
// a kit or a helper outside its tests.
func TestNoProductionPackageDependsOnTesting(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`, "github.com/retrysafe/retrysafe/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	const module = "github.com/retrysafe/retrysafe/"
	kits := []string{module + "framework/retrysafetest", module + "framework/store/storetest", module + "internal/"}
	checked, kitsSeen := 0, 0
	for line := range strings.Lines(string(out)) {
		fields := strings.Fields(line)
		if len(fields) == 0 {
			continue
		}
		pkg, deps := fields[0], fields[1:]
		kit := false
		for _, k := range kits {
			kit = kit || strings.HasPrefix(pkg, k)
		}
		if kit {
			kitsSeen++
			continue
		}
		checked++
		for _, dep := range deps {
			if dep == "testing" {
				t.Errorf("%s depends on package testing: only test kits and internal test helpers may; import them from _test.go files", pkg)
			}
		}
	}
	if checked < 20 || kitsSeen < 2 {
		t.Fatalf("go list listed %d packages and %d kits: not the module's", checked, kitsSeen)
	}
}
