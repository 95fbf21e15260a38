package outbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the SQLite driver
	"github.com/retrysafe/retrysafe/migrations"
)

// An event is written on the transaction of the effect it reports; the
// relay publishes it afterwards, here to an in-process publisher.
func Example() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "outbox-example")
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}

	err = db.Write(ctx, func(tx *gorm.DB) error {
		// … the effect's own writes on tx …
		ev, err := outbox.NewEvent("acme", "payment.succeeded", "payment", "pay_1", map[string]any{"amount": 4200})
		if err != nil {
			return err
		}
		_, err = outbox.Write(ctx, tx, ev)
		return err
	})
	if err != nil {
		panic(err)
	}

	relay, err := outbox.NewRelay(db, outbox.PublisherFunc(func(_ context.Context, ev outbox.Event) error {
		fmt.Printf("%s %s/%s seq %d %s\n", ev.Type, ev.AggregateType, ev.AggregateID, ev.Seq, ev.Payload)
		return nil
	}), outbox.Config{})
	if err != nil {
		panic(err)
	}
	if _, err := relay.Drain(ctx); err != nil {
		panic(err)
	}
	// Output: payment.succeeded payment/pay_1 seq 1 {"amount":4200}
}
