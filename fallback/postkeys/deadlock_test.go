package postkeys_test

import (
	"context"
	"strconv"
	"testing"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestALocalRequestChosenAsADeadlockVictimRunsAgain: a Local request whose
// transaction the database rolls back to break a deadlock (PostgreSQL's
// 40P01, MariaDB's 1213) committed nothing, so the framework runs it
// again instead of answering 409: the client gets its one execution, the
// counter moves once, and a retry replays it.
//
// The deadlock is built, not hoped for: a transaction of the test holds
// the request's key (an uncommitted claim) and enough other rows that
// InnoDB picks the request as the victim; once the request waits for the
// key, the test's transaction asks for the counter row the request holds.
// On PostgreSQL the request, waiting first, is the one whose deadlock
// check runs first (the test's session checks only after 30 s). The test
// then rolls back, and the request's second run commits. SQLite has one
// writer and no deadlocks.
func TestALocalRequestChosenAsADeadlockVictimRunsAgain(t *testing.T) {
	for _, dialect := range testdb.Dialects() {
		if dialect == "sqlite" {
			continue
		}
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			h := setup(t, testdb.New(t, dialect), nil)
			ctx := context.Background()
			if err := h.db.Gorm.Exec("INSERT INTO counters (tenant_id, value) VALUES ('a', 0)").Error; err != nil {
				t.Fatal(err)
			}
			records := h.db.Driver.Records()
			const key = "deadlock-victim"
			holder := h.db.Gorm.Begin()
			defer holder.Rollback()
			var waitsOnHolder string
			switch dialect {
			case "postgres":
				var pid int64
				if err := holder.Raw("SELECT pg_backend_pid()").Scan(&pid).Error; err != nil {
					t.Fatal(err)
				}
				if err := holder.Exec("SET LOCAL deadlock_timeout = '30s'").Error; err != nil {
					t.Fatal(err)
				}
				waitsOnHolder = "SELECT count(*) FROM pg_stat_activity WHERE " + strconv.FormatInt(pid, 10) + " = ANY(pg_blocking_pids(pid))"
			case "mysql":
				// The request's insert of the key, under way in this
				// test's own database (no other test's statement counts):
				// the holder holds the key, so it waits.
				waitsOnHolder = `SELECT count(*) FROM information_schema.PROCESSLIST
WHERE DB = DATABASE() AND INFO LIKE 'INSERT INTO idempotency_records%'`
			}
			// The holder's weight: rows it wrote (InnoDB rolls back the
			// transaction that wrote fewer).
			for i := range 50 {
				if err := holder.Exec("INSERT INTO widgets (tenant_id, id, name) VALUES ('a', ?, 'w')", "wd_"+strconv.Itoa(i)).Error; err != nil {
					t.Fatal(err)
				}
			}
			if _, ok, err := records.Insert(ctx, holder, &store.RecordClaimParams{ID: store.RecordKey{Tenant: "a", Operation: "counters", Key: key},
				Fingerprint: "held by the test", FingerprintVersion: 1, Point: postkeys.PointStarted, Lease: lease, TTL: lease}); err != nil || !ok {
				t.Fatalf("the holder's claim: %v, %v", ok, err)
			}
			answered := make(chan response, 1)
			go func() { answered <- h.post("/v1/counters", tokenA, key, `{"by":5}`) }()
			for waiting := int64(0); waiting == 0; {
				select {
				case r := <-answered:
					t.Fatalf("the request was answered before it waited for the key: %d %s", r.Status, r.Body)
				default:
				}
				if err := h.db.Gorm.Raw(waitsOnHolder).Scan(&waiting).Error; err != nil {
					t.Fatal(err)
				}
			}
			// Closes the cycle: the request holds the counter, and waits
			// for the key the holder holds.
			if err := holder.Exec("UPDATE counters SET value = value + 1000 WHERE tenant_id = 'a'").Error; err != nil {
				t.Fatalf("the holder was chosen as the victim, not the request: %v", err)
			}
			if err := holder.Rollback().Error; err != nil {
				t.Fatal(err)
			}
			first := <-answered
			wantStatus(t, first, 200)
			if n := h.count("SELECT value FROM counters WHERE tenant_id = 'a'"); n != 5 {
				t.Fatalf("counter = %d, want 5 (one execution)", n)
			}
			if rec := h.record("a", "counters", key); rec.State != store.RecordCompleted || rec.Attempt != 1 {
				t.Fatalf("record %+v, want completed at attempt 1", rec)
			}
			wantReplay(t, h.post("/v1/counters", tokenA, key, `{"by":5}`), first)
			if n := h.count("SELECT value FROM counters WHERE tenant_id = 'a'"); n != 5 {
				t.Fatalf("counter after the replay = %d, want 5", n)
			}
			if n := h.count("SELECT count(*) FROM widgets"); n != 0 {
				t.Fatalf("%d widgets of the rolled back holder", n)
			}
		})
	}
}
