package pgtemp_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgtemp"
)

// TestKillAndRestartKeepsCommittedRows: a row committed before an
// immediate stop is there after the restart.
func TestKillAndRestartKeepsCommittedRows(t *testing.T) {
	t.Parallel()
	s := pgtemp.Start(t)
	url := s.CreateDatabase("probe")
	ctx := context.Background()
	exec := func(q string) {
		t.Helper()
		db, err := sql.Open("pgx", url)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if _, err := db.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	exec("CREATE TABLE t (n int); INSERT INTO t VALUES (1)")
	s.Kill()
	s.Restart()
	db, err := sql.Open("pgx", url)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows after restart = %d, %v; want 1", n, err)
	}
}

// TestPgBouncerTransactionPooling reaches the server through pgbouncer in
// transaction pooling with pgx's simple protocol.
func TestPgBouncerTransactionPooling(t *testing.T) {
	t.Parallel()
	s := pgtemp.Start(t)
	s.CreateDatabase("probe")
	b := s.StartPgBouncer(pgtemp.BouncerConfig{})
	db, err := sql.Open("pgx", b.URL("probe")+"&default_query_exec_mode=simple_protocol")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	if err := db.QueryRowContext(context.Background(), "SELECT $1::int + 1", 41).Scan(&n); err != nil || n != 42 {
		t.Fatalf("through pgbouncer: %d, %v", n, err)
	}
}

// TestPgBouncerRefusesUnlistedStartupParameters: a DSN parameter such as
// lock_timeout is a startup parameter, which pgbouncer refuses unless
// ignore_startup_parameters lists it (docs/scaling.md).
func TestPgBouncerRefusesUnlistedStartupParameters(t *testing.T) {
	t.Parallel()
	s := pgtemp.Start(t)
	s.CreateDatabase("probe")
	b := s.StartPgBouncer(pgtemp.BouncerConfig{IgnoreStartupParameters: "extra_float_digits"})
	db, err := sql.Open("pgx", b.URL("probe")+"&default_query_exec_mode=simple_protocol&lock_timeout=1000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.PingContext(context.Background())
	if err == nil || !strings.Contains(err.Error(), "unsupported startup parameter") {
		t.Fatalf("ping with lock_timeout through pgbouncer: %v, want unsupported startup parameter", err)
	}
}
