package tests

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/pgtemp"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// sameRequestAtOnce sends every operation of w copies times at once,
// spread over the processes at bases, and checks the answers: for each
// operation one execution and copies-1 replays of it, byte for byte, and in
// the database exactly one effect each.
func sameRequestAtOnce(t *testing.T, w *workload, copies int, dsn string, bases ...string) *faultTally {
	t.Helper()
	var ops []faultOp
	for _, op := range w.ops {
		for range copies {
			ops = append(ops, op)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4 * copies}}
	defer client.CloseIdleConnections()
	tally := &faultTally{}
	finals := runOps(ctx, t, ops, 2*copies, client, tally, bases...)
	logical := make([]response, len(w.ops))
	for i, op := range w.ops {
		same := finals[i*copies : (i+1)*copies]
		fresh := 0
		for _, r := range same {
			if r.Status != same[0].Status || !bytes.Equal(r.Body, same[0].Body) {
				t.Fatalf("%s: answers differ:\n%d %s\n%d %s", op.name(), r.Status, r.Body, same[0].Status, same[0].Body)
			}
			if r.Header.Get("Idempotent-Replayed") != "true" {
				fresh++
			}
		}
		if fresh != 1 {
			t.Fatalf("%s: %d of %d answers are not replays, want exactly 1", op.name(), fresh, copies)
		}
		logical[i] = same[0]
	}
	w.wantFinals(t, logical)
	w.wantEffects(t, openStore(t, dsn), finals)
	if got := tally.count(500, 599); got != 0 {
		t.Fatalf("5xx answers: %d (%s)", got, tally)
	}
	return tally
}

// TestFaultSeveralProcesses runs 2 and 4 demo processes on one database,
// on each server configured (PostgreSQL, MariaDB), and sends each
// operation (PUT orders, payments, transfers) 8 times at once, spread over
// the processes: exactly one effect each.
func TestFaultSeveralProcesses(t *testing.T) {
	t.Parallel()
	servers := testdb.Servers(t)
	bin := demoproc.Build(t)
	for _, server := range servers {
		for _, procs := range []int{2, 4} {
			t.Run(fmt.Sprintf("%s, %d processes", server, procs), func(t *testing.T) {
				t.Parallel()
				dsn := testdb.New(t, server)
				var bases []string
				for range procs {
					bases = append(bases, demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn, Args: keepEvents}).URL())
				}
				n := faultScale(30, 150)
				tally := sameRequestAtOnce(t, newWorkload(n, fmt.Sprintf("procs%d", procs), uint64(procs)), 8, dsn, bases...)
				t.Logf("%s, %d processes: %d operations x 8 concurrent copies; %s; 0 duplicates", server, procs, n, tally)
			})
		}
	}
}

// TestFaultPgBouncer is TestFaultSeveralProcesses behind PgBouncer in
// transaction pooling: 4 demo processes reach a PostgreSQL of the test's own
// through one pgbouncer (pool_mode=transaction). pgx must not rely on
// prepared statements (default_query_exec_mode=simple_protocol, or exec /
// cache_describe), and pgbouncer must ignore the timeouts the store puts in
// the DSN as startup parameters (docs/scaling.md).
func TestFaultPgBouncer(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t)
	pg := pgtemp.Start(t)
	direct := pg.CreateDatabase("retrysafe")
	bouncer := pg.StartPgBouncer(pgtemp.BouncerConfig{PoolMode: "transaction", DefaultPoolSize: 10})
	dsn := bouncer.URL("retrysafe") + "&default_query_exec_mode=simple_protocol"
	bin := demoproc.Build(t)
	var bases []string
	for range 4 {
		bases = append(bases, demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn, Args: keepEvents}).URL())
	}
	n := faultScale(30, 150)
	tally := sameRequestAtOnce(t, newWorkload(n, "bouncer", 9), 8, direct, bases...)
	t.Logf("4 processes behind pgbouncer (transaction pooling, 10 server connections): %d operations x 8 concurrent copies; %s; 0 duplicates", n, tally)
}
