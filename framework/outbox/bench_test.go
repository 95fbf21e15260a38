package outbox_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// nopPublisher accepts every event.
type nopPublisher struct{}

func (nopPublisher) Publish(context.Context, outbox.Event) error { return nil }

// BenchmarkWrite measures a transaction of store.DB.Write that writes one
// event, by each of the three ways to write one, over 100 aggregates: the
// event's statement and the transaction's round trips are the cost.
func BenchmarkWrite(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			db := setup(b, testdb.New(b, dialect))
			ctx := context.Background()
			for _, way := range []struct {
				name  string
				write func(tx *gorm.DB, ev outbox.Event) error
			}{
				{"Write", func(tx *gorm.DB, ev outbox.Event) error { _, err := outbox.Write(ctx, tx, ev); return err }},
				{"Append", func(tx *gorm.DB, ev outbox.Event) error { return outbox.Append(ctx, tx, ev) }},
				{"AppendOrdered", func(tx *gorm.DB, ev outbox.Event) error { return outbox.AppendOrdered(ctx, tx, ev) }},
			} {
				b.Run(way.name, func(b *testing.B) {
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						ev := outbox.Event{Tenant: "acme", Type: "thing.happened", AggregateType: "thing",
							AggregateID: fmt.Sprintf("%s%03d", way.name, i%100), Payload: []byte(`{"i":1}`)}
						if err := db.Write(ctx, func(tx *gorm.DB) error { return way.write(tx, ev) }); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// BenchmarkRelayBatch measures one [outbox.Relay.RunOnce] over a backlog
// of 100 events of 10 aggregates with a publisher that accepts them at
// once: the claim and the settle of a batch, deleting the published
// events or (keep) moving them to outbox_published. On PostgreSQL the
// outbox is vacuumed between runs, outside the timer, as a running relay
// vacuums it.
func BenchmarkRelayBatch(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			for _, keep := range []bool{false, true} {
				name := "delete"
				cfg := outbox.Config{BatchSize: 100}
				if keep {
					name, cfg.Retention = "keep", time.Hour
				}
				b.Run(name, func(b *testing.B) {
					db := setup(b, testdb.New(b, dialect))
					ctx := context.Background()
					relay, err := outbox.NewRelay(db, nopPublisher{}, cfg)
					if err != nil {
						b.Fatal(err)
					}
					b.ReportAllocs()
					for i := 0; i < b.N; i++ {
						b.StopTimer()
						if err := db.Write(ctx, func(tx *gorm.DB) error {
							for j := range 100 {
								ev := outbox.Event{Tenant: "acme", Type: "thing.happened", AggregateType: "thing",
									AggregateID: fmt.Sprintf("agg%02d", j%10), Payload: []byte(`{"i":1}`)}
								if err := outbox.Append(ctx, tx, ev); err != nil {
									return err
								}
							}
							return nil
						}); err != nil {
							b.Fatal(err)
						}
						if dialect == "postgres" {
							// The dead rows of the last batch, which a
							// running relay vacuums away: each run claims
							// from the same table.
							if err := db.Gorm.Exec("VACUUM outbox_events").Error; err != nil {
								b.Fatal(err)
							}
						}
						b.StartTimer()
						st, err := relay.RunOnce(ctx)
						if err != nil || st.Published != 100 {
							b.Fatalf("run: %+v %v", st, err)
						}
					}
				})
			}
		})
	}
}
