package storetest

import (
	"context"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

// testClock: the driver's Now reads into a DatabaseTime in UTC, agrees
// with this process's clock (both run on one machine in the suite) and
// does not go backwards between statements, whatever the session's time
// zone setting.
func testClock(t *testing.T, h Harness) {
	ctx := context.Background()
	db := open(t, h, store.Config{})
	read := func() time.Time {
		t.Helper()
		var now store.DatabaseTime
		if err := db.SQL().QueryRowContext(ctx, "SELECT "+db.Driver.Now()).Scan(&now); err != nil {
			t.Fatal(err)
		}
		if now.Time.Location() != time.UTC {
			t.Fatalf("the database time %v is not in UTC", now.Time)
		}
		return now.Time
	}
	first := read()
	if d := time.Since(first); d > time.Minute || d < -time.Minute {
		t.Fatalf("the database clock %v is %v away from this process's clock", first, d)
	}
	if second := read(); second.Before(first) {
		t.Fatalf("the database clock went back from %v to %v", first, second)
	}
}
