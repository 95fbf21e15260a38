package schema_test

import (
	"context"
	"os"
	"testing"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
	"github.com/retrysafe/retrysafe/resources/schema"
)

// TestMySQLSchemasApplyTwice: the example resources' tables and each
// example program's apply on the MySQL family, and applying them again
// (what a start after a crash half-way does) changes nothing.
func TestMySQLSchemasApplyTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(t, "mysql"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for range 2 {
		if err := schema.Up(ctx, db); err != nil {
			t.Fatal(err)
		}
		for _, example := range []string{"credits", "customers", "invoices"} {
			if err := migrations.Apply(ctx, db, os.DirFS("../../examples/"+example+"/schema"), "example_"+example); err != nil {
				t.Fatalf("%s: %v", example, err)
			}
		}
	}
	var n int
	if err := db.SQL().QueryRowContext(ctx, "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE() AND table_name IN ('orders', 'order_items', 'accounts', 'transfers', 'sandbox_charges', 'payments', 'ledger_entries', 'credit_accounts', 'credit_entries', 'customers', 'invoices', 'invoice_emails', 'billing_records')").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 13 {
		t.Fatalf("%d of the 13 tables", n)
	}
}
