package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

func migrated(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	return db
}

func count(t *testing.T, db *store.DB, query string) int64 {
	t.Helper()
	var n int64
	if err := db.Gorm.Raw(query).Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestOutboxParkedAndRequeued: an event the publisher refused past the
// relay's limit is parked; the command lists it, counts it, requeues it
// (pending again, attempts reset) and says not found the second time.
func TestOutboxParkedAndRequeued(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := migrated(t, dsn)
		ev, err := outbox.NewEvent("acme", "payment.succeeded", "payment", "pay_1", map[string]int{"amount": 1})
		if err != nil {
			t.Fatal(err)
		}
		var written []outbox.Event
		if err := db.Write(ctx, func(tx *gorm.DB) error { written, err = outbox.Write(ctx, tx, ev); return err }); err != nil {
			t.Fatal(err)
		}
		refuse := outbox.PublisherFunc(func(context.Context, outbox.Event) error { return fmt.Errorf("too large: %w", outbox.ErrRefused) })
		relay, err := outbox.NewRelay(db, refuse, outbox.Config{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		if stats, err := relay.RunOnce(ctx); err != nil || stats.Parked != 1 {
			t.Fatalf("RunOnce = %+v, %v", stats, err)
		}
		id := written[0].ID.String()
		var parked []parkedJSON
		out := runCmd(t, nil, "outbox", "list", "-parked", "-json", "-db", dsn).want(t, exitOK)
		if err := json.Unmarshal([]byte(out.stdout), &parked); err != nil || len(parked) != 1 || parked[0].ID != id ||
			parked[0].Attempts != 1 || !strings.Contains(parked[0].LastError, "too large") {
			t.Fatalf("list %s (%v)", out.stdout, err)
		}
		runCmd(t, nil, "outbox", "list", "-db", dsn).want(t, exitUsage)
		if s := runCmd(t, nil, "outbox", "stats", "-json", "-db", dsn).want(t, exitOK); !strings.Contains(s.stdout, `"parked": 1`) ||
			!strings.Contains(s.stdout, `"pending": 0`) {
			t.Fatalf("stats %s", s.stdout)
		}
		runCmd(t, nil, "outbox", "requeue", id, "-db", dsn).want(t, exitUsage) // flags come before the IDs
		runCmd(t, nil, "outbox", "requeue", "-db", dsn, id).want(t, exitOK)
		if n := count(t, db, "SELECT count(*) FROM outbox_events WHERE parked_at IS NULL AND attempts = 0"); n != 1 {
			t.Fatalf("%d pending fresh events after requeue, want 1", n)
		}
		runCmd(t, nil, "outbox", "requeue", "-db", dsn, id).want(t, exitNotFound)
		published := outbox.PublisherFunc(func(context.Context, outbox.Event) error { return nil })
		relay, err = outbox.NewRelay(db, published, outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if stats, err := relay.RunOnce(ctx); err != nil || stats.Published != 1 {
			t.Fatalf("after requeue RunOnce = %+v, %v", stats, err)
		}
	})
}

// TestJanitorRun: -dry-run counts the expired completed records and
// deletes nothing; run deletes them in batches and leaves live and unknown
// records alone.
func TestJanitorRun(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := migrated(t, dsn)
		records := db.Driver.Records()
		for i := range 5 {
			id := store.RecordKey{Tenant: "acme", Operation: "op", Key: fmt.Sprint("k", i)}
			c, ok, err := records.Insert(ctx, db.Gorm, &store.RecordClaimParams{ID: id, Fingerprint: "f", FingerprintVersion: 1,
				Point: postkeys.PointStarted, Lease: time.Minute, TTL: time.Hour})
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			ttl := time.Duration(0) // expired at once
			if i == 4 {
				ttl = time.Hour
			}
			if i == 3 {
				continue // stays in progress
			}
			if ok, err := records.Complete(ctx, db.Gorm, &store.RecordCompleteParams{ID: id, Fence: c.Fence,
				RecordOutcome: store.RecordOutcome{Status: http.StatusOK, Body: []byte(`{}`), TTL: ttl}}); err != nil || !ok {
				t.Fatal(ok, err)
			}
		}
		if r := runCmd(t, nil, "janitor", "run", "-dry-run", "-json", "-db", dsn).want(t, exitOK); !strings.Contains(r.stdout, `"expired": 3`) {
			t.Fatalf("dry run %s", r.stdout)
		}
		if n := count(t, db, "SELECT count(*) FROM idempotency_records"); n != 5 {
			t.Fatalf("dry run deleted: %d records left", n)
		}
		r := runCmd(t, nil, "janitor", "run", "-batch", "2", "-json", "-db", dsn).want(t, exitOK)
		if !strings.Contains(r.stdout, `"deleted": 3`) || !strings.Contains(r.stdout, `"batches": 2`) {
			t.Fatalf("run %s", r.stdout)
		}
		if n := count(t, db, "SELECT count(*) FROM idempotency_records"); n != 2 {
			t.Fatalf("%d records left, want the live and the in-progress one", n)
		}
	})
}
