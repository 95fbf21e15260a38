package postkeys_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/fallback/postkeys/recordstoretest"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/migrations"
)

// offsetClock is the moved database clock of one harness.
type offsetClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *offsetClock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

func (c *offsetClock) Advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.off += d
}

func harnessOn(t *testing.T, db *store.DB) recordstoretest.Harness {
	t.Helper()
	if err := migrations.Up(context.Background(), db.SQL(), db.Driver.Name()); err != nil {
		t.Fatal(err)
	}
	clock := &offsetClock{}
	storetest.ShiftRecordClock(t, db, clock.Offset)
	records, err := postkeys.NewRecordStore(db, postkeys.RecordStoreConfig{})
	if err != nil {
		t.Fatal(err)
	}
	return recordstoretest.Harness{DB: db, Store: records, Advance: clock.Advance}
}
