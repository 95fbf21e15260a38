package tests

import (
	"testing"

	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/orders"
)

// TestOrdersSchema: the orders migration (resources/schema 00001) has the
// keys and indexes the engine and the list filters rely on.
func TestOrdersSchema(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		storetest.CheckTable(t, e.app.DB, storetest.TableCheck{Table: "orders",
			NewRow: func(int) any {
				return &orders.Order{Customer: "cus_1", Currency: "EUR", TotalCents: 1}
			},
			Indexes: [][]string{{"tenant_id", "status", "created_at", "id"}, {"tenant_id", "customer", "created_at", "id"}}})
	})
}
