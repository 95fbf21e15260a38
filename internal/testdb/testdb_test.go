package testdb

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store/storemysql"
)

// TestMySQLDatabasePerTest: a test gets a database of its own, utf8mb4
// with a binary no-pad collation, and it is gone when the test ends.
func TestMySQLDatabasePerTest(t *testing.T) {
	base := MySQL(t)
	admin, err := storemysql.OpenDB(base, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	ctx := context.Background()
	var name string
	t.Run("inner", func(t *testing.T) {
		dsn := New(t, "mysql")
		u, err := url.Parse(dsn)
		if err != nil {
			t.Fatal(err)
		}
		name = strings.TrimPrefix(u.Path, "/")
		var collation string
		if err := admin.QueryRowContext(ctx, "SELECT default_collation_name FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&collation); err != nil {
			t.Fatalf("the test's database %s: %v", name, err)
		}
		if collation != "utf8mb4_nopad_bin" {
			t.Fatalf("collation = %s", collation)
		}
	})
	var n int
	if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM information_schema.schemata WHERE schema_name = ?", name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("database %s is left behind", name)
	}
}
