package inbox_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/inbox"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the SQLite driver
	"github.com/retrysafe/retrysafe/migrations"
)

// A consumer receives the same event twice (the broker delivers at least
// once): Process runs the consumer's writes for the first delivery only,
// in the transaction that records the message ID.
func ExampleInbox_Process() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "inbox-example")
	defer os.RemoveAll(dir)
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "app.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	db.Gorm.Exec("CREATE TABLE ledger (payment TEXT NOT NULL, amount INTEGER NOT NULL)")
	in, err := inbox.New(db, inbox.Config{})
	if err != nil {
		panic(err)
	}

	deliver := func(messageID string) {
		duplicate, err := in.Process(ctx, "ledger", messageID, func(tx *gorm.DB) error {
			return tx.Exec("INSERT INTO ledger (payment, amount) VALUES (?, ?)", "pay_1", 4200).Error
		})
		if err != nil {
			panic(err)
		}
		fmt.Println(messageID, "duplicate:", duplicate)
	}
	deliver("0d9f1c2b-3e4a-4b5c-8d6e-7f8091a2b3c4")
	deliver("0d9f1c2b-3e4a-4b5c-8d6e-7f8091a2b3c4") // redelivered

	var entries int64
	db.Gorm.Raw("SELECT count(*) FROM ledger").Scan(&entries)
	fmt.Println("ledger entries:", entries)
	// Output:
	// 0d9f1c2b-3e4a-4b5c-8d6e-7f8091a2b3c4 duplicate: false
	// 0d9f1c2b-3e4a-4b5c-8d6e-7f8091a2b3c4 duplicate: true
	// ledger entries: 1
}
