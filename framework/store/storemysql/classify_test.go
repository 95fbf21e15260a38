package storemysql_test

import (
	"context"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestErrorsReadAsTheFrameworkNeeds: each failure MySQL reports is read as
// what it means to a request, on a real server: a key taken, text that
// cannot be stored (never truncated: the strict sql_mode), the server
// gone, a statement past its time. NUL is a character like another in
// MySQL text and is stored as it is.
func TestErrorsReadAsTheFrameworkNeeds(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	exec := func(query string, args ...any) error {
		_, err := db.ExecContext(ctx, query, args...)
		return err
	}
	for name, c := range map[string]struct {
		err  error
		want storemysql.Kind
	}{
		"duplicate key":     {exec("INSERT INTO t (k, v) VALUES (1, 0)"), storemysql.UniqueViolation},
		"invalid UTF-8":     {exec("UPDATE t SET s = ? WHERE k = 1", "a\xff\xfe"), storemysql.UnstorableText},
		"too long":          {exec("UPDATE t SET s = ? WHERE k = 1", strings.Repeat("é", 9)), storemysql.UnstorableText},
		"statement timeout": {exec("SET STATEMENT max_statement_time = 0.001 FOR SELECT SLEEP(1) FROM t t1, t t2, t t3"), storemysql.Unavailable},
		"killed connection": {func() error {
			c := conn(t, db)
			var id int64
			if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
				t.Fatal(err)
			}
			if err := exec("KILL CONNECTION ?", id); err != nil {
				t.Fatal(err)
			}
			_, err := c.ExecContext(ctx, "UPDATE t SET v = 1")
			return err
		}(), storemysql.Unavailable},
		"no such database": {func() error {
			u, err := url.Parse(testdb.New(t, "mysql"))
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/retrysafe_no_such_database"
			missing, err := storemysql.OpenDB(u.String(), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer missing.Close()
			return missing.PingContext(ctx)
		}(), storemysql.Unavailable},
		"refused": {func() error {
			down, err := storemysql.OpenDB("mysql://root@127.0.0.1:1/x", time.Second)
			if err != nil {
				t.Fatal(err)
			}
			defer down.Close()
			return down.PingContext(ctx)
		}(), storemysql.Unavailable},
	} {
		if got := storemysql.KindOf(c.err); got != c.want {
			t.Errorf("%s: %v read as %v, want %v", name, c.err, got, c.want)
		}
	}
	if err := exec("UPDATE t SET s = ? WHERE k = 1", "a\x00b"); err != nil {
		t.Fatal(err)
	}
	var s string
	if err := db.QueryRowContext(ctx, "SELECT s FROM t WHERE k = 1").Scan(&s); err != nil || s != "a\x00b" {
		t.Fatalf("NUL round trip: %q, %v", s, err)
	}
}

// TestTheDatabaseClockIgnoresTheSessionTimeZone: UTC_TIMESTAMP(6), the
// clock of leases and expiry, is UTC whatever the session's time zone,
// where NOW(6) moves with it.
func TestTheDatabaseClockIgnoresTheSessionTimeZone(t *testing.T) {
	t.Parallel()
	db := setup(t)
	c := conn(t, db)
	ctx := context.Background()
	if _, err := c.ExecContext(ctx, "SET time_zone = '+05:00'"); err != nil {
		t.Fatal(err)
	}
	var utc, shifted bool
	if err := c.QueryRowContext(ctx, "SELECT UTC_TIMESTAMP(6) = CONVERT_TZ(NOW(6), '+05:00', '+00:00'), NOW(6) = UTC_TIMESTAMP(6)").Scan(&utc, &shifted); err != nil {
		t.Fatal(err)
	}
	if !utc || shifted {
		t.Fatalf("UTC_TIMESTAMP is UTC: %v; NOW equals it under +05:00: %v", utc, shifted)
	}
}
