package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the SQLite driver
	"github.com/retrysafe/retrysafe/migrations"
)

// Write joins the caller's transaction: when the transaction rolls back,
// its event goes with it, and one that commits is numbered within its
// aggregate.
func ExampleWrite() {
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

	write := func(typ string, fail error) error {
		return db.Write(ctx, func(tx *gorm.DB) error {
			ev, err := outbox.NewEvent("acme", typ, "order", "ord_1", map[string]string{"status": typ})
			if err != nil {
				return err
			}
			written, err := outbox.Write(ctx, tx, ev)
			if err != nil {
				return err
			}
			fmt.Println("written:", written[0].Type, "seq", written[0].Seq)
			return fail // the effect's own writes failed: roll back
		})
	}
	if err := write("order.created", nil); err != nil {
		panic(err)
	}
	fmt.Println(write("order.submitted", errors.New("out of stock")))

	var events int64
	db.Gorm.Raw("SELECT count(*) FROM outbox_events").Scan(&events)
	fmt.Println("events:", events)
	// Output:
	// written: order.created seq 1
	// written: order.submitted seq 2
	// out of stock
	// events: 1
}
