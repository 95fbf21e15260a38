package main

import (
	"testing"

	"github.com/retrysafe/retrysafe/internal/pgha"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestBenchReplica: with -replica, each scenario that may read a replica
// runs again as NAME@replica on a server that reads the standby of a
// pg_auto_failover formation, and the standby answers it: the primary
// counts about one commit per request of the primary's run (a read is a
// transaction there) and under a third of that for the replica's run (what
// is left is the formation's own: the monitor's health checks, the
// keepers, the relay).
func TestBenchReplica(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t) // part of the PostgreSQL suite: skip without TEST_DATABASE_URL
	f := pgha.Start(t, pgha.Config{})
	rep, table := runBench(t, "-db", f.NodeURL(f.Primary()), "-replica", f.NodeURL(f.Standby()),
		"-scenarios", "get,post-local-replay,payments-replay,put-replay", "-d", "500ms")
	byName := map[string]Result{}
	for _, r := range rep.Results {
		byName[r.Scenario] = r
	}
	for _, name := range []string{"get", "post-local-replay", "payments-replay"} {
		primary, ok1 := byName[name]
		replica, ok2 := byName[name+replicaSuffix]
		if !ok1 || !ok2 {
			t.Fatalf("%s and %s%s not both in the report:\n%s", name, name, replicaSuffix, table)
		}
		if primary.CommitsPerRequest < 0.9 || replica.CommitsPerRequest > primary.CommitsPerRequest/3 || replica.Requests == 0 || replica.Non2xx != 0 {
			t.Errorf("%s: %.2f commits per request on the primary, %.2f with the replica (%d requests, %d non-2xx)\n%s",
				name, primary.CommitsPerRequest, replica.CommitsPerRequest, replica.Requests, replica.Non2xx, table)
		}
	}
	if _, ok := byName["put-replay"+replicaSuffix]; ok {
		t.Errorf("put-replay ran on the replica; PUT's read-first never reads one:\n%s", table)
	}
}
