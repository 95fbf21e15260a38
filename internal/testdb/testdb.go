package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"github.com/google/uuid"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	// The drivers of the databases tests run on; storepg also registers
	// pgx's database/sql driver "pgx", used for schema setup.
	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	_ "github.com/retrysafe/retrysafe/framework/store/storepg"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite"
)

// EnvURL names the environment variable holding the PostgreSQL test URL.
const EnvURL = "TEST_DATABASE_URL"

// EnvMySQLURL names the environment variable holding the MySQL-family test
// URL (mysql://user:pass@host:port/db): the server on which [New] creates
// a database per test.
const EnvMySQLURL = "TEST_MYSQL_URL"

// Dialects returns the dialects to test on: "sqlite" always, "postgres"
// when TEST_DATABASE_URL is set, "mysql" when TEST_MYSQL_URL is set.
func Dialects() []string {
	dialects := []string{"sqlite"}
	if os.Getenv(EnvURL) != "" {
		dialects = append(dialects, "postgres")
	}
	if os.Getenv(EnvMySQLURL) != "" {
		dialects = append(dialects, "mysql")
	}
	return dialects
}

// Servers returns the database servers to test on, "postgres" when
// TEST_DATABASE_URL is set and "mysql" when TEST_MYSQL_URL is set, for the
// tests that need one (several processes on one database), skipping the
// test when neither is.
func Servers(tb testing.TB) []string {
	tb.Helper()
	servers := slices.DeleteFunc(Dialects(), func(d string) bool { return d == "sqlite" })
	if len(servers) == 0 {
		tb.Skip(EnvURL + " and " + EnvMySQLURL + " are not set")
	}
	return servers
}

// Run runs fn as a parallel subtest per dialect, each with a new database.
func Run(t *testing.T, fn func(t *testing.T, dsn string)) {
	t.Helper()
	for _, dialect := range Dialects() {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			fn(t, New(t, dialect))
		})
	}
}

// New returns the DSN of a new, empty database of dialect, dropped at the
// end of the test.
func New(tb testing.TB, dialect string) string {
	tb.Helper()
	switch dialect {
	case "sqlite":
		return "sqlite:" + filepath.Join(tb.TempDir(), "test.db")
	case "postgres":
		return newSchema(tb)
	case "mysql":
		return newMySQLDatabase(tb)
	}
	tb.Fatalf("testdb: unknown dialect %q", dialect)
	return ""
}

// Gorm opens dsn, a DSN of [New], as an application opens its own
// *gorm.DB: through gorm.io/driver/postgres, gorm.io/driver/mysql (with
// its defaults: AutoMigrate makes DATETIME(3) columns) or
// github.com/glebarez/sqlite in WAL mode, with cfg (a zero gorm.Config
// when nil: gorm's default logger). It is closed at the end of the test.
func Gorm(tb testing.TB, dsn string, cfg *gorm.Config) *gorm.DB {
	tb.Helper()
	if cfg == nil {
		cfg = &gorm.Config{}
	}
	var dialector gorm.Dialector
	switch {
	case strings.HasPrefix(dsn, "sqlite:"):
		dialector = sqlite.Open("file:" + strings.TrimPrefix(dsn, "sqlite:") + "?_pragma=journal_mode(WAL)&_pragma=busy_timeout(5000)")
	case strings.HasPrefix(dsn, storemysql.Scheme):
		mc, err := storemysql.Config(dsn, 5*time.Second)
		if err != nil {
			tb.Fatalf("testdb: %v", err)
		}
		dialector = gormmysql.Open(mc.FormatDSN())
	default:
		dialector = postgres.Open(dsn)
	}
	gdb, err := gorm.Open(dialector, cfg)
	if err != nil {
		tb.Fatalf("testdb: open %s: %v", dialector.Name(), err)
	}
	tb.Cleanup(func() {
		if sqlDB, err := gdb.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return gdb
}

// Postgres returns the admin URL from TEST_DATABASE_URL, skipping the test
// when it is not set.
func Postgres(tb testing.TB) string {
	tb.Helper()
	return fromEnv(tb, EnvURL)
}

// MySQL returns the server URL from TEST_MYSQL_URL, skipping the test when
// it is not set.
func MySQL(tb testing.TB) string {
	tb.Helper()
	return fromEnv(tb, EnvMySQLURL)
}

// fromEnv returns the environment variable name, skipping the test when it
// is not set.
func fromEnv(tb testing.TB, name string) string {
	tb.Helper()
	u := os.Getenv(name)
	if u == "" {
		tb.Skip(name + " is not set")
	}
	return u
}

// newMySQLDatabase creates a database of its own for the test on the
// TEST_MYSQL_URL server (utf8mb4 with a binary, no-pad collation: the
// tables' default, see storemysql's migrations) and drops it at cleanup.
func newMySQLDatabase(tb testing.TB) string {
	tb.Helper()
	base := MySQL(tb)
	name := "t_" + randomName()
	admin, err := storemysql.OpenDB(base, 5*time.Second)
	if err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	createDropped(tb, admin, "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin", "DROP DATABASE "+name)
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	u.Path = "/" + name
	return u.String()
}

func newSchema(tb testing.TB) string {
	tb.Helper()
	base := Postgres(tb)
	schema := "t_" + randomName()
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	createDropped(tb, admin, "CREATE SCHEMA "+schema, "DROP SCHEMA "+schema+" CASCADE")
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}

// createDropped runs create on admin, and drop at the end of the test;
// admin is closed after drop.
func createDropped(tb testing.TB, admin *sql.DB, create, drop string) {
	tb.Helper()
	if _, err := admin.ExecContext(context.Background(), create); err != nil {
		_ = admin.Close()
		tb.Fatalf("testdb: %s: %v", create, err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), drop); err != nil {
			tb.Errorf("testdb: %s: %v", drop, err)
		}
	})
}

// randomName is 16 random hex digits, for a schema or database name.
func randomName() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Age moves the times the PUT engine stamps on the rows of table that
// match where (created_at, updated_at and, on a tombstone, deleted_at) d
// into the past, as if the rows had been written d earlier. The engine
// judges replay windows and tombstone retention on the database clock, so
// this is how a test lets them pass without sleeping, and without a clock
// that production statements would have to carry.
func Age(tb testing.TB, db *gorm.DB, table string, d time.Duration, where string, args ...any) {
	tb.Helper()
	var rows []struct {
		TenantID  string
		ID        uuid.UUID
		CreatedAt time.Time
		UpdatedAt time.Time
		DeletedAt *time.Time
	}
	if err := db.Table(table).Select("tenant_id, id, created_at, updated_at, deleted_at").Where(where, args...).Scan(&rows).Error; err != nil {
		tb.Fatalf("testdb: read the times of %s: %v", table, err)
	}
	if len(rows) == 0 {
		tb.Fatalf("testdb: no row of %s matches %q", table, where)
	}
	for _, r := range rows {
		times := map[string]any{"created_at": r.CreatedAt.Add(-d).UTC(), "updated_at": r.UpdatedAt.Add(-d).UTC()}
		if r.DeletedAt != nil {
			times["deleted_at"] = r.DeletedAt.Add(-d).UTC()
		}
		if err := db.Table(table).Where("tenant_id = ? AND id = ?", r.TenantID, r.ID).Updates(times).Error; err != nil {
			tb.Fatalf("testdb: age a row of %s: %v", table, err)
		}
	}
}
