package migrations

import (
	"context"
	"testing"
	"time"

	"github.com/pressly/goose/v3"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestOutboxPublishedMovesPublishedEvents upgrades an outbox that holds a
// published and a pending event: 00003 moves the published one to
// outbox_published and leaves the pending one, and going down restores
// both in outbox_events.
func TestOutboxPublishedMovesPublishedEvents(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if db.Driver.Name() == "mysql" {
			t.Skip("the MySQL outbox_events never held published rows (storemysql's migration 00002): nothing to move")
		}
		m := db.Driver.Migrations()
		p, err := goose.NewProvider(goose.Dialect(m.Dialect), db.SQL(), m.Files, goose.WithDisableGlobalRegistry(true), goose.WithTableName(VersionTable))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.UpTo(ctx, 2); err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Second)
		insert := `INSERT INTO outbox_events (id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, available_at, published_at)
VALUES (?, 'acme', 'thing.happened', 'thing', 't1', ?, '{}', '{}', ?, ?, ?)`
		if err := db.Gorm.Exec(insert, "7b0a1c3e-0000-4000-8000-000000000001", 1, now, now, now).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Gorm.Exec(insert, "7b0a1c3e-0000-4000-8000-000000000002", 2, now, now, nil).Error; err != nil {
			t.Fatal(err)
		}
		if _, err := p.Up(ctx); err != nil {
			t.Fatal(err)
		}
		var published, pending []int64
		if err := db.Gorm.Raw("SELECT seq FROM outbox_published").Scan(&published).Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Gorm.Raw("SELECT seq FROM outbox_events").Scan(&pending).Error; err != nil {
			t.Fatal(err)
		}
		if len(published) != 1 || published[0] != 1 || len(pending) != 1 || pending[0] != 2 {
			t.Fatalf("after 00003: published %v, pending %v; want [1] and [2]", published, pending)
		}
		if _, err := p.DownTo(ctx, 2); err != nil {
			t.Fatal(err)
		}
		var restored []struct {
			Seq       int64
			Published bool
		}
		if err := db.Gorm.Raw("SELECT seq, published_at IS NOT NULL AS published FROM outbox_events ORDER BY seq").Scan(&restored).Error; err != nil {
			t.Fatal(err)
		}
		if len(restored) != 2 || !restored[0].Published || restored[1].Published {
			t.Fatalf("after going down: %+v", restored)
		}
	})
}
