package collection_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// gadget is a model with a unique business column per tenant, and an
// index of a filter's, each led by tenant_id.
type gadget struct {
	collection.System
	Name  string `gorm:"not null;uniqueIndex:idx_gadgets_name,expression:tenant_id,priority:1;uniqueIndex:idx_gadgets_name,priority:2"`
	Color string `gorm:"not null;index:idx_gadgets_color,expression:tenant_id,priority:1;index:idx_gadgets_color,priority:2"`
}

func openDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// statusIndex is the index of the status filter that System declares.
var statusIndex = []string{"tenant_id", "status", "created_at", "id"}

// TestAutoMigrateMakesTheKeysAndIndexes: gorm's AutoMigrate of a model
// embedding collection.System creates the (tenant_id, id) primary key and
// the list and status indexes; a business index led by tenant_id is
// declared with an expression (see Invoice.Customer), and a unique one
// refuses a duplicate within a tenant only.
func TestAutoMigrateMakesTheKeysAndIndexes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := openDB(t, dsn)
		if err := db.Gorm.AutoMigrate(&Invoice{}, &InvoiceLine{}, &gadget{}); err != nil {
			t.Fatal(err)
		}
		// Running it again (the next start of the service) changes nothing.
		if err := db.Gorm.AutoMigrate(&Invoice{}, &InvoiceLine{}, &gadget{}); err != nil {
			t.Fatalf("second AutoMigrate: %v", err)
		}
		storetest.CheckTable(t, db, storetest.TableCheck{Table: "invoices",
			NewRow:  func(int) any { return &Invoice{Customer: "c"} },
			Indexes: [][]string{statusIndex, {"tenant_id", "customer"}}})
		storetest.CheckTable(t, db, storetest.TableCheck{Table: "gadgets",
			NewRow:  func(n int) any { return &gadget{Name: fmt.Sprint("g", n), Color: "red"} },
			Indexes: [][]string{statusIndex, {"tenant_id", "name"}, {"tenant_id", "color"}}})
		ctx := context.Background()
		insert := func(tenant, name string) error {
			// Times set: MySQL's strict sql_mode refuses a zero date.
			now := time.Now().UTC()
			g := &gadget{System: collection.System{TenantID: tenant, ID: uuid.New(), Version: 1, CreatedAt: now, UpdatedAt: now}, Name: name}
			_, err := db.Rows().Insert(ctx, db.Gorm, store.RowInsertParams{Table: "gadgets", Row: g})
			return err
		}
		if err := insert("t1", "unique"); err != nil {
			t.Fatal(err)
		}
		if err := insert("t2", "unique"); err != nil {
			t.Fatalf("the unique name in another tenant: %v", err)
		}
		if err := insert("t1", "unique"); !errors.Is(err, store.ErrUniqueViolation) {
			t.Fatalf("a duplicate unique name within a tenant = %v, want ErrUniqueViolation", err)
		}
	})
}
