package wire_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestImportBoundary fails when wire/ or client/ depends, even
// transitively, on gin, gorm, a database driver or the server side: a
// service that only calls a retrysafe API must not pull them in.
func TestImportBoundary(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	forbidden := []string{
		"github.com/gin-gonic/", "gorm.io/", "github.com/jackc/", "github.com/lib/pq",
		"github.com/glebarez/", "modernc.org/sqlite", "github.com/mattn/go-sqlite3",
		"github.com/pressly/goose", "github.com/hashicorp/go-retryablehttp", "github.com/getkin/kin-openapi",
		"github.com/retrysafe/retrysafe/framework", "github.com/retrysafe/retrysafe/fallback",
	}
	for _, pkg := range []string{"github.com/retrysafe/retrysafe/wire", "github.com/retrysafe/retrysafe/client"} {
		out, err := exec.Command("go", "list", "-deps", pkg).CombinedOutput()
		if err != nil {
			t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
		}
		for dep := range strings.FieldsSeq(string(out)) {
			for _, f := range forbidden {
				if strings.HasPrefix(dep, f) {
					t.Errorf("%s depends on %s", pkg, dep)
				}
			}
		}
	}
}
