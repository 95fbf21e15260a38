// Package rowstoretest is the contract suite of [collection.RowStore]: what
// any implementation, on any dialect, must do for the PUT engine to keep
// its promises. Run it from a test of the implementation's package:
//
//	func TestRowStoreContract(t *testing.T) {
//		rowstoretest.Run(t, func(t *testing.T) *store.DB { return openMyDB(t) }, collection.NewRowStore)
//	}
//
// Each subtest gets a fresh database from open and creates its tables with
// gorm's AutoMigrate of [Widget] and [Part]. [CheckTable] checks that a
// resource table (however it was created) has the keys and indexes the
// engine relies on.
package rowstoretest
