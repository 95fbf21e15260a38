package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/fallback/postkeys/recordstoretest"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testclock"
	"github.com/retrysafe/retrysafe/migrations"
)

// testRecords runs the idempotency records' contract (recordstoretest) on
// the driver's statements ([store.Driver.Records], through
// postkeys.NewRecordStore) and its migrations, through store.Open and on
// the application's own handle (store.New): claims, takeovers, fencing,
// leases and expiry on the database clock.
func testRecords(t *testing.T, h Harness) {
	on := func(t *testing.T, db *store.DB) recordstoretest.Harness {
		t.Helper()
		if err := migrations.Up(context.Background(), db.SQL(), db.Driver.Name()); err != nil {
			t.Fatal(err)
		}
		clock := testclock.New(time.Now())
		records, err := postkeys.NewRecordStore(db, postkeys.RecordStoreConfig{ClockOffset: clock.Offset})
		if err != nil {
			t.Fatal(err)
		}
		return recordstoretest.Harness{DB: db, Store: records, Advance: clock.Advance}
	}
	t.Run("Open", func(t *testing.T) {
		t.Parallel()
		recordstoretest.Run(t, func(t *testing.T) recordstoretest.Harness {
			return on(t, open(t, h, store.Config{LockTimeout: 200 * time.Millisecond}))
		})
	})
	t.Run("OwnGormDB", func(t *testing.T) {
		t.Parallel()
		recordstoretest.Run(t, func(t *testing.T) recordstoretest.Harness {
			db, err := store.New(context.Background(), h.Gorm(t), store.Config{LockTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return on(t, db)
		})
	})
}
