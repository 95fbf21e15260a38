package collection_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/rowstoretest"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func openDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestAutoMigrateMakesTheKeysAndIndexes: gorm's AutoMigrate of a model
// embedding collection.System creates the (tenant_id, id) primary key and
// the list and status indexes; a business index led by tenant_id is
// declared with an expression (see Invoice.Customer), and a unique one
// refuses a duplicate within a tenant only.
func TestAutoMigrateMakesTheKeysAndIndexes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := openDB(t, dsn)
		if err := db.Gorm.AutoMigrate(&Invoice{}, &InvoiceLine{}, &rowstoretest.Widget{}, &rowstoretest.Part{}); err != nil {
			t.Fatal(err)
		}
		// Running it again (the next start of the service) changes nothing.
		if err := db.Gorm.AutoMigrate(&Invoice{}, &InvoiceLine{}, &rowstoretest.Widget{}, &rowstoretest.Part{}); err != nil {
			t.Fatalf("second AutoMigrate: %v", err)
		}
		rowstoretest.CheckTable(t, db, rowstoretest.TableCheck{Table: "invoices",
			NewRow:  func(string, uuid.UUID, int) collection.Row { return &Invoice{Customer: "c"} },
			Indexes: [][]string{{"tenant_id", "customer"}}})
		rowstoretest.CheckTable(t, db, rowstoretest.TableCheck{Table: "widgets",
			NewRow: func(_ string, _ uuid.UUID, n int) collection.Row {
				return &rowstoretest.Widget{Name: "w" + string(rune('0'+n)), Color: "red"}
			},
			Indexes: [][]string{{"tenant_id", "name"}, {"tenant_id", "color"}}})
		rows := collection.NewRowStore(db.Driver)
		ctx := context.Background()
		insert := func(tenant, name string) error {
			// Times set: MySQL's strict sql_mode refuses a zero date.
			now := time.Now().UTC()
			w := &rowstoretest.Widget{System: collection.System{TenantID: tenant, ID: uuid.New(), Version: 1, CreatedAt: now, UpdatedAt: now}, Name: name}
			_, err := rows.Insert(ctx, db.Gorm, collection.InsertRowParams{Table: "widgets", Row: w})
			return err
		}
		if err := insert("t1", "unique"); err != nil {
			t.Fatal(err)
		}
		if err := insert("t2", "unique"); err != nil {
			t.Fatalf("the unique name in another tenant: %v", err)
		}
		if err := insert("t1", "unique"); err == nil {
			t.Fatal("a duplicate unique name within a tenant was accepted")
		}
	})
}
