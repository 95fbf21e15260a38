package main

import (
	"context"
	"strings"
	"testing"

	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storepg"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/schema"
)

// orderKeyPlan explains the generic plan of the foreign-key check that
// every order_items insert runs against orders.
func orderKeyPlan(t *testing.T, b *bench) string {
	t.Helper()
	ctx := context.Background()
	db, err := bulkDB(b.db)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	for _, q := range []string{"SET plan_cache_mode = force_generic_plan",
		"PREPARE fk(text, uuid) AS SELECT 1 FROM ONLY orders x WHERE tenant_id = $1 AND id = $2 FOR KEY SHARE OF x"} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := conn.QueryContext(ctx, "EXPLAIN EXECUTE fk('acme', gen_random_uuid())")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var line string
		if err := rows.Scan(&line); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, line)
	}
	return strings.Join(plan, "\n")
}

// TestSettlePlansOrderKeysByPrimaryKey: after settle, PostgreSQL plans the
// lookup of an order by its key (the foreign-key check of its items) on
// the primary key, not on a list index that reads the whole tenant.
func TestSettlePlansOrderKeysByPrimaryKey(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	d, err := openDatabase(ctx, testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	b := &bench{db: d}
	db, err := store.Open(ctx, d.DSN, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := schema.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	// On the new, empty table PostgreSQL 15 picks a list index here (not
	// asserted: it is the planner's tie to break).
	t.Logf("before settle:\n%s", orderKeyPlan(t, b))
	if err := b.settle(ctx); err != nil {
		t.Fatal(err)
	}
	if plan := orderKeyPlan(t, b); !strings.Contains(plan, "orders_pkey") {
		t.Fatalf("after settle the key lookup does not use the primary key:\n%s", plan)
	}
}
