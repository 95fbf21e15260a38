package storetest

import (
	"testing"

	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/rowstoretest"
	"github.com/retrysafe/retrysafe/framework/store"
)

// testRows runs the resource rows' contract (rowstoretest) on the
// framework's RowStore: idempotent inserts, versioned updates, tombstones,
// child rows, snapshot reads and lists.
func testRows(t *testing.T, h Harness) {
	rowstoretest.Run(t, func(t *testing.T) *store.DB { return open(t, h, store.Config{}) }, collection.NewRowStore)
}
