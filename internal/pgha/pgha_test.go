package pgha_test

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/pgha"
)

// TestSwitchesKeepCommittedRows: a row committed before each switch (the
// operator's failover, the primary killed, the primary stopped) is on the
// new primary, which the multi-host DSN finds on its own; a restart of the
// whole formation keeps the primary where it was.
func TestSwitchesKeepCommittedRows(t *testing.T) {
	t.Parallel()
	f := pgha.Start(t, pgha.Config{})
	db, err := sql.Open("pgx", f.DSN())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ctx := context.Background()
	// exec retries until the new primary takes the write.
	exec := func(q string, args ...any) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			_, err := db.ExecContext(ctx, q, args...)
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %v\n%s", q, err, f.Log())
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	count := func() int {
		t.Helper()
		var n int
		if err := db.QueryRowContext(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	exec("CREATE TABLE t (n int)")
	exec("INSERT INTO t VALUES (1)")

	start := time.Now()
	step := func(s string) { t.Logf("%s at %s", s, time.Since(start).Round(time.Millisecond)) }
	first := f.Primary()
	if second := f.PerformFailover(); second == first {
		t.Fatalf("perform failover left %s the primary", first.Name)
	}
	step("failover")
	exec("INSERT INTO t VALUES (2)")
	step("write")
	f.WaitReplicated()

	step("replicated")
	killed := f.KillPrimary()
	exec("INSERT INTO t VALUES (3)")
	step("write after kill")
	if f.Primary() == killed {
		t.Fatalf("%s is still the primary after its kill", killed.Name)
	}
	f.Rejoin(killed)
	f.WaitReplicated()

	step("replicated")
	stopped := f.StopPrimary()
	step("stopped")
	exec("INSERT INTO t VALUES (4)")
	step("write after stop")
	f.Rejoin(stopped)
	f.WaitReplicated()
	if n := count(); n != 4 {
		t.Fatalf("rows after three switches = %d, want 4", n)
	}

	// A restart of the whole formation keeps the primary and the rows;
	// the server is a new one (its start time moved).
	var started time.Time
	if err := db.QueryRowContext(ctx, "SELECT pg_postmaster_start_time()").Scan(&started); err != nil {
		t.Fatal(err)
	}
	primary := f.Primary()
	f.Restart()
	step("restarted")
	exec("INSERT INTO t VALUES (5)")
	var again time.Time
	if err := db.QueryRowContext(ctx, "SELECT pg_postmaster_start_time()").Scan(&again); err != nil {
		t.Fatal(err)
	}
	if !again.After(started) || f.Primary() != primary {
		t.Fatalf("after the restart: started %s (before %s), primary %s (before %s)", again, started, f.Primary().Name, primary.Name)
	}
	if n := count(); n != 5 {
		t.Fatalf("rows after the restart = %d, want 5", n)
	}
}
