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

// TestTheClaimRunsWithoutTheSubqueryCache: both statements of the relay's
// claim turn off MariaDB's subquery cache for themselves alone. The plan
// of each statement the driver sends has no expression cache, where the
// same statement without the setting caches each correlated look for an
// earlier event of the aggregate; the session's optimizer_switch is
// unchanged after it. What the claim claims is the contract suite's
// (TestContract, TestContractBatched).
func TestTheClaimRunsWithoutTheSubqueryCache(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(t, "mysql"), store.Config{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	const prefix = "SET STATEMENT optimizer_switch = 'subquery_cache=off' FOR "
	for _, c := range []struct {
		sql  string
		args map[string]any
	}{
		{storemysql.LockSQL, map[string]any{"now": time.Now().UTC(), "limit": 100}},
		{storemysql.ReadSQL, map[string]any{"claimed": "[1, 2]"}},
	} {
		claim, ok := strings.CutPrefix(c.sql, prefix)
		if !ok {
			t.Fatalf("the claim's statement does not start with %q:\n%s", prefix, c.sql)
		}
		plan := func(sql string) string {
			t.Helper()
			var p string
			if err := db.Gorm.Raw(sql, c.args).Row().Scan(&p); err != nil {
				t.Fatal(err)
			}
			return p
		}
		if p := plan("EXPLAIN FORMAT=JSON " + claim); !strings.Contains(p, "expression_cache") {
			t.Fatalf("the statement without the setting caches no subquery on this server; the setting may go:\n%s\n%s", claim, p)
		}
		if p := plan(prefix + "EXPLAIN FORMAT=JSON " + claim); strings.Contains(p, "expression_cache") || !strings.Contains(p, "outbox_events") {
			t.Fatalf("the driver's statement plans a subquery cache:\n%s", p)
		}
	}
	var switches string
	if err := db.Gorm.Raw("SELECT @@session.optimizer_switch").Row().Scan(&switches); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(switches, "subquery_cache=on") {
		t.Fatalf("the session's optimizer_switch after the claim: %s", switches)
	}
}

// relayStore opens an application's handle with the DSN parameters
// params on a new database, migrates it, and serves it with a lock
// timeout of a second.
func relayStore(t *testing.T, params string) (*store.DB, *gorm.DB, *sql.DB) {
	t.Helper()
	ctx := context.Background()
	gdb := ownGorm(t, params)
	pool, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.New(ctx, gdb, store.Config{LockTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	return db, gdb, pool
}

// writeEvents writes n events of n aggregates, one Write each, and
// returns their positions.
func writeEvents(t *testing.T, db *store.DB, gdb *gorm.DB, now time.Time, n int) []int64 {
	t.Helper()
	aggregates := make([]string, n)
	for i := range aggregates {
		aggregates[i] = fmt.Sprint(i + 1)
	}
	return writeEventsOf(t, db, gdb, now, aggregates...)
}

// writeEventsOf writes an event of each of aggregates, in order, one
// Write each, and returns their positions.
func writeEventsOf(t *testing.T, db *store.DB, gdb *gorm.DB, now time.Time, aggregates ...string) []int64 {
	t.Helper()
	ctx := context.Background()
	for i, agg := range aggregates {
		if err := db.Write(ctx, func(tx *gorm.DB) error {
			_, err := db.Driver.Outbox().Write(ctx, tx, store.OutboxWriteParams{Events: []store.OutboxWriteEvent{{
				ID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i+1), Tenant: "acme", Type: "thing.done",
				AggregateType: "thing", AggregateID: agg, Payload: `{}`, Headers: `{}`, CreatedAt: now}}})
			return err
		}); err != nil {
			t.Fatal(err)
		}
	}
	positions := eventPositions(t, gdb)
	if len(positions) != len(aggregates) {
		t.Fatalf("positions %v after writing %d events", positions, len(aggregates))
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
// On a pool that batches and on one that does not, with the published
// events deleted and with them kept in outbox_published (retention).
func TestSettlingWaitsForNoOtherEvent(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	type pool struct {
		name   string
		params string
	}
	for _, c := range []struct {
		pool
		keep bool
	}{
		{pool{"batched", "parseTime=true&charset=utf8mb4&multiStatements=true&interpolateParams=true"}, false},
		{pool{"one statement a round trip", "parseTime=true&charset=utf8mb4"}, false},
		{pool{"batched, kept", "parseTime=true&charset=utf8mb4&multiStatements=true&interpolateParams=true"}, true},
		{pool{"one statement a round trip, kept", "parseTime=true&charset=utf8mb4"}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, gdb, pool := relayStore(t, c.params)
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
				return db.Driver.Outbox().Settle(ctx, tx, store.OutboxSettleParams{Now: now, Published: positions[:3], KeepPublished: c.keep})
			}); err != nil {
				t.Fatalf("settling three events while another is held and one uncommitted: %v", err)
			}
			if left := eventPositions(t, gdb); !slices.Equal(left, positions[3:]) {
				t.Fatalf("positions left %v, want %v: the settled ones deleted, the held one kept", left, positions[3:])
			}
			var kept []int64
			if err := gdb.Table("outbox_published").Order("position").Pluck("position", &kept).Error; err != nil {
				t.Fatal(err)
			}
			if want := positions[:3]; !c.keep && len(kept) != 0 || c.keep && !slices.Equal(kept, want) {
				t.Fatalf("outbox_published holds %v, want the settled ones kept: %t", kept, c.keep)
			}
		})
	}
}

// TestASettledBatchIsOneDelete: on a pool that batches, a settled batch
// is one DELETE, sent with the COMMIT under one mark: settling five
// events runs one DELETE on the server and two SETs (SET TRANSACTION and
// the delete's mark), not a statement an event. A delete refused in the
// middle of the batch (a trigger on the third event) is read as the
// settle's (its wrap), nothing of the batch is deleted, and the
// connection is kept.
func TestASettledBatchIsOneDelete(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, gdb := countedStore(t, true, new(atomic.Int64))
	if err := migrations.Up(ctx, db); err != nil {
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
	deletes := func() int64 {
		t.Helper()
		var n int64
		if err := gdb.Raw(`SELECT SUM(VARIABLE_VALUE) FROM information_schema.SESSION_STATUS
WHERE VARIABLE_NAME IN ('COM_DELETE', 'COM_DELETE_MULTI')`).Row().Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	_, before := session()
	deletesBefore := deletes()
	if err := settle(positions); err != nil {
		t.Fatal(err)
	}
	if _, after := session(); after-before != 2 {
		t.Fatalf("settling five events ran %d SETs, want 2", after-before)
	}
	if n := deletes() - deletesBefore; n != 1 {
		t.Fatalf("settling five events ran %d DELETEs, want 1", n)
	}
	if err := gdb.Table("outbox_events").Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("%d events (%v) after the settle, want 0", n, err)
	}
}

// TestAClaimLooksForEarlierEventsOnceItsLocksAreHeld: the claim's look for
// an earlier pending event of a claimed event's aggregate reads the
// outbox as it is once the claim's locks are held, not as it was before
// them. Aggregate A has events a1 and a2, B has b1; another relay holds
// a1 while the claim locks its candidates (a2 and b1), and is paused
// (a gorm callback on the application's handle) before it reads them:
//   - the other relay publishes a1 meanwhile: a2 is claimed with b1, its
//     aggregate's earliest pending event now;
//   - the other relay rolls back meanwhile: a1 is pending again and
//     outside the claim, so a2 is left out and b1 claimed alone.
func TestAClaimLooksForEarlierEventsOnceItsLocksAreHeld(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	for _, c := range []struct {
		name      string
		published bool
		want      []string
	}{
		{"the earlier event published meanwhile", true, []string{"A/2", "B/1"}},
		{"the earlier event released meanwhile", false, []string{"B/1"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			db, gdb, pool := relayStore(t, "parseTime=true&charset=utf8mb4&multiStatements=true&interpolateParams=true")
			now := time.Now().UTC().Truncate(time.Microsecond)
			a1 := writeEventsOf(t, db, gdb, now, "A", "A", "B")[0]
			other, err := pool.BeginTx(ctx, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = other.Rollback() })
			if _, err := other.ExecContext(ctx, "SELECT position FROM outbox_events WHERE position = ? FOR UPDATE", a1); err != nil {
				t.Fatal(err)
			}
			// The claim stops before its read, its locks held, until the
			// other relay has finished.
			paused, resume := make(chan struct{}), make(chan struct{})
			var once atomic.Bool
			if err := gdb.Callback().Query().Before("gorm:query").Register("test:pause_before_read", func(tx *gorm.DB) {
				if strings.Contains(tx.Statement.SQL.String(), "JSON_TABLE") && once.CompareAndSwap(false, true) {
					close(paused)
					<-resume
				}
			}); err != nil {
				t.Fatal(err)
			}
			type claimed struct {
				rows []store.OutboxEventRow
				err  error
			}
			done := make(chan claimed, 1)
			go func() {
				var got claimed
				got.err = db.Write(ctx, func(tx *gorm.DB) error {
					var err error
					got.rows, err = db.Driver.Outbox().Claim(ctx, tx, store.OutboxClaimParams{Now: now, Limit: 10})
					return err
				})
				done <- got
			}()
			select {
			case <-paused:
			case got := <-done:
				t.Fatalf("the claim ended (%d rows, %v) without a read of its locked rows", len(got.rows), got.err)
			}
			if c.published {
				if _, err := other.ExecContext(ctx, "DELETE FROM outbox_events WHERE position = ?", a1); err != nil {
					t.Fatal(err)
				}
				if err := other.Commit(); err != nil {
					t.Fatal(err)
				}
			} else if err := other.Rollback(); err != nil {
				t.Fatal(err)
			}
			close(resume)
			got := <-done
			if got.err != nil {
				t.Fatal(got.err)
			}
			var events []string
			for _, r := range got.rows {
				events = append(events, fmt.Sprintf("%s/%d", r.AggregateID, r.Seq))
			}
			if !slices.Equal(events, c.want) {
				t.Fatalf("claimed %v, want %v", events, c.want)
			}
		})
	}
}
