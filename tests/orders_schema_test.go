package tests

import (
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/rowstoretest"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/orders"
)

// TestOrdersSchema: the orders migration (resources/schema 00001) has the
// keys and indexes the engine and the list filters rely on.
func TestOrdersSchema(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		rowstoretest.CheckTable(t, e.app.DB, rowstoretest.TableCheck{Table: "orders",
			NewRow: func(string, uuid.UUID, int) collection.Row {
				return &orders.Order{Customer: "cus_1", Currency: "EUR", TotalCents: 1}
			},
			Indexes: [][]string{{"tenant_id", "customer", "created_at", "id"}}})
	})
}
