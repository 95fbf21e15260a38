package postkeys_test

import (
	"context"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/glebarez/sqlite"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/fallback/postkeys/recordstoretest"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
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
	if err := migrations.Up(context.Background(), db.SQL(), db.Dialect.Name()); err != nil {
		t.Fatal(err)
	}
	clock := &offsetClock{}
	records, err := postkeys.NewRecordStore(db, postkeys.RecordStoreConfig{ClockOffset: clock.Offset})
	if err != nil {
		t.Fatal(err)
	}
	return recordstoretest.Harness{DB: db, Store: records, Advance: clock.Advance}
}

// TestRecordStoreContract runs the contract suite on every dialect through
// store.Open.
func TestRecordStoreContract(t *testing.T) {
	for _, dialect := range testdb.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			recordstoretest.Run(t, func(t *testing.T) recordstoretest.Harness {
				db, err := store.Open(context.Background(), testdb.New(t, dialect), store.Config{LockTimeout: 200 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				return harnessOn(t, db)
			})
		})
	}
}

// TestRecordStoreContractOnOwnGormDB runs the suite on a *gorm.DB that the
// application opened itself with plain gorm.Open, no framework DSN
// settings (no busy timeout, no _txlock, no lock_timeout), wrapped by
// store.New.
func TestRecordStoreContractOnOwnGormDB(t *testing.T) {
	for _, dialect := range testdb.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			recordstoretest.Run(t, func(t *testing.T) recordstoretest.Harness {
				var dialector gorm.Dialector
				if dialect == "sqlite" {
					dialector = sqlite.Open("file:" + filepath.Join(t.TempDir(), "app.db") + "?" +
						url.Values{"_pragma": {"journal_mode(WAL)"}}.Encode())
				} else {
					dialector = postgres.Open(testdb.New(t, dialect))
				}
				gdb, err := gorm.Open(dialector, &gorm.Config{})
				if err != nil {
					t.Fatal(err)
				}
				db, err := store.New(context.Background(), gdb, store.Config{LockTimeout: 200 * time.Millisecond})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = db.Close() })
				return harnessOn(t, db)
			})
		})
	}
}
