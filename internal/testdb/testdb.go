// Package testdb gives each test a database of its own: a fresh SQLite file
// always, and a fresh PostgreSQL schema when TEST_DATABASE_URL is set. Both
// are removed when the test ends, so tests run in parallel and leave nothing
// behind.
package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"net/url"
	"os"
	"path/filepath"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for schema setup
)

// EnvURL names the environment variable holding the PostgreSQL test URL.
const EnvURL = "TEST_DATABASE_URL"

// Dialects returns the dialects to test on: "sqlite" always, "postgres"
// when TEST_DATABASE_URL is set.
func Dialects() []string {
	if os.Getenv(EnvURL) != "" {
		return []string{"sqlite", "postgres"}
	}
	return []string{"sqlite"}
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
	}
	tb.Fatalf("testdb: unknown dialect %q", dialect)
	return ""
}

// Postgres returns the admin URL from TEST_DATABASE_URL, skipping the test
// when it is not set.
func Postgres(tb testing.TB) string {
	tb.Helper()
	u := os.Getenv(EnvURL)
	if u == "" {
		tb.Skip("TEST_DATABASE_URL is not set")
	}
	return u
}

func newSchema(tb testing.TB) string {
	tb.Helper()
	base := Postgres(tb)
	var b [8]byte
	_, _ = rand.Read(b[:])
	schema := "t_" + hex.EncodeToString(b[:])
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	ctx := context.Background()
	if _, err := admin.ExecContext(ctx, "CREATE SCHEMA "+schema); err != nil {
		_ = admin.Close()
		tb.Fatalf("testdb: create schema: %v", err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.ExecContext(context.Background(), "DROP SCHEMA "+schema+" CASCADE"); err != nil {
			tb.Errorf("testdb: drop schema %s: %v", schema, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatalf("testdb: %v", err)
	}
	q := u.Query()
	q.Set("search_path", schema)
	u.RawQuery = q.Encode()
	return u.String()
}
