package storemysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

// TestTheClaimRunsWithoutTheSubqueryCache: the relay's claim turns off
// MariaDB's subquery cache for itself alone. The plan of the statement
// the driver sends has no expression cache, where the same claim without
// the setting caches each correlated look for an earlier event of the
// aggregate; the session's optimizer_switch is unchanged after it. What
// the claim claims is the contract suite's (TestContract,
// TestContractBatched).
func TestTheClaimRunsWithoutTheSubqueryCache(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(t, "mysql"), store.Config{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db.SQL(), "mysql"); err != nil {
		t.Fatal(err)
	}
	const prefix = "SET STATEMENT optimizer_switch = 'subquery_cache=off' FOR "
	claim, ok := strings.CutPrefix(storemysql.ClaimSQL, prefix)
	if !ok {
		t.Fatalf("the claim does not start with %q", prefix)
	}
	args := map[string]any{"now": time.Now().UTC(), "limit": 100}
	plan := func(sql string) string {
		t.Helper()
		var p string
		if err := db.Gorm.Raw(sql, args).Row().Scan(&p); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if p := plan("EXPLAIN FORMAT=JSON " + claim); !strings.Contains(p, "expression_cache") {
		t.Fatalf("the claim without the setting caches no subquery on this server; the setting may go:\n%s", p)
	}
	if p := plan(prefix + "EXPLAIN FORMAT=JSON " + claim); strings.Contains(p, "expression_cache") || !strings.Contains(p, "outbox_events") {
		t.Fatalf("the driver's claim plans a subquery cache:\n%s", p)
	}
	var switches string
	if err := db.Gorm.Raw("SELECT @@session.optimizer_switch").Row().Scan(&switches); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(switches, "subquery_cache=on") {
		t.Fatalf("the session's optimizer_switch after the claim: %s", switches)
	}
}

// writeEvents writes n events of n aggregates, one Write each, and
// returns their positions.
func writeEvents(t *testing.T, db *store.DB, gdb *gorm.DB, now time.Time, n int) []int64 {
	t.Helper()
	ctx := context.Background()
	for i := range n {
		if err := db.Write(ctx, func(tx *gorm.DB) error {
			_, err := db.Driver.Outbox().Write(ctx, tx, store.OutboxWriteParams{Events: []store.OutboxWriteEvent{{
				ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1), Tenant: "acme", Type: "thing.done",
				AggregateType: "thing", AggregateID: fmt.Sprint(i + 1), Payload: `{}`, Headers: `{}`, CreatedAt: now}}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	positions := eventPositions(t, gdb)
	if len(positions) != n {
		t.Fatalf("positions %v after writing %d events", positions, n)
	}
	return positions
}

// eventPositions reads the positions in outbox_events, in order.
func eventPositions(t *testing.T, gdb *gorm.DB) []int64 {
	t.Helper()
	var positions []int64
	if err := gdb.Table("outbox_events").Order("position").Pluck("position", &positions).Error; err != nil {
		t.Fatal(err)
	}
	return positions
}

// TestSettlingWaitsForNoOtherEvent: a relay's settle deletes its published
// events without waiting for any other event's lock: one another relay
// holds (claimed FOR UPDATE) and one a writer inserted and has not
// committed. An outbox holds few rows, and MariaDB plans a DELETE of an
// IN list on a small table as a scan that locks every row it reads, so a
// settle waited for both until its lock timeout (two relays deadlocked).
// On a pool that batches and on one that does not.
func TestSettlingWaitsForNoOtherEvent(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	for _, c := range []struct {
		name   string
		params string
	}{
		{"batched", "parseTime=true&charset=utf8mb4&multiStatements=true&interpolateParams=true"},
		{"one statement a round trip", "parseTime=true&charset=utf8mb4"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			gdb := ownGorm(t, c.params)
			pool, err := gdb.DB()
			if err != nil {
				t.Fatal(err)
			}
			if err := migrations.Up(ctx, pool, "mysql"); err != nil {
				t.Fatal(err)
			}
			db, err := store.New(ctx, gdb, store.Config{LockTimeout: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			now := time.Now().UTC().Truncate(time.Microsecond)
			positions := writeEvents(t, db, gdb, now, 4)
			// Another relay holds the fourth event; a writer has inserted a
			// fifth and not committed.
			for _, hold := range []func(tx *sql.Tx) error{
				func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, "SELECT position FROM outbox_events WHERE position = ? FOR UPDATE", positions[3])
					return err
				},
				func(tx *sql.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT INTO outbox_events (id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, available_at)
VALUES ('00000000-0000-4000-8000-000000000005', 'acme', 'thing.done', 'thing', '5', 1, '{}', '{}', ?, ?)`, now, now)
					return err
				},
			} {
				tx, err := pool.BeginTx(ctx, nil)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = tx.Rollback() })
				if err := hold(tx); err != nil {
					t.Fatal(err)
				}
			}
			if err := db.Write(ctx, func(tx *gorm.DB) error {
				return db.Driver.Outbox().Settle(ctx, tx, store.OutboxSettleParams{Now: now, Published: positions[:3]})
			}); err != nil {
				t.Fatalf("settling three events while another is held and one uncommitted: %v", err)
			}
			if left := eventPositions(t, gdb); !slices.Equal(left, positions[3:]) {
				t.Fatalf("positions left %v, want %v: the settled ones deleted, the held one kept", left, positions[3:])
			}
		})
	}
}

// TestASettledBatchCarriesOneMark: on a pool that batches, the deletes of
// a settled batch go out with the COMMIT under one mark: settling five
// events runs two SETs on the server (SET TRANSACTION and the first
// delete's mark), not one a delete. A delete refused in the middle
// of the batch is still read as the settle's (its wrap), nothing of the
// batch is deleted, and the connection is kept.
func TestASettledBatchCarriesOneMark(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, gdb := countedStore(t, true, new(atomic.Int64))
	if err := migrations.Up(ctx, db.SQL(), "mysql"); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	positions := writeEvents(t, db, gdb, now, 5)
	session := func() (id, sets int64) { return sessionOf(t, gdb) }
	settle := func(published []int64) error {
		return db.Write(ctx, func(tx *gorm.DB) error {
			return db.Driver.Outbox().Settle(ctx, tx, store.OutboxSettleParams{Now: now, Published: published})
		})
	}
	// The third event's delete is refused.
	if err := gdb.Exec(fmt.Sprintf(`CREATE TRIGGER refuse_third BEFORE DELETE ON outbox_events FOR EACH ROW
IF OLD.position = %d THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused'; END IF`, positions[2])).Error; err != nil {
		t.Fatal(err)
	}
	conn, _ := session()
	err := settle(positions)
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1644 || !strings.Contains(err.Error(), "outbox: delete published") {
		t.Fatalf("settle with the third delete refused = %v, want its 1644 wrapped as the settle's", err)
	}
	var n int64
	if err := gdb.Table("outbox_events").Count(&n).Error; err != nil || n != 5 {
		t.Fatalf("%d events (%v) after the refused settle, want all 5", n, err)
	}
	if id, _ := session(); id != conn {
		t.Fatalf("connection %d after a known failure, want %d kept", id, conn)
	}
	if err := gdb.Exec("DROP TRIGGER refuse_third").Error; err != nil {
		t.Fatal(err)
	}
	_, before := session()
	if err := settle(positions); err != nil {
		t.Fatal(err)
	}
	if _, after := session(); after-before != 2 {
		t.Fatalf("settling five events ran %d SETs, want 2", after-before)
	}
	if err := gdb.Table("outbox_events").Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("%d events (%v) after the settle, want 0", n, err)
	}
}
