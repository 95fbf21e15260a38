package store_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/glebarez/sqlite"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the driver of the application's database
	"github.com/retrysafe/retrysafe/migrations"
)

// ExampleNew wraps the application's own *gorm.DB: no DSN parameter of the
// framework's, the application's pool and logger stay as they are. The
// application imports the store's driver of its database (storesqlite
// here, storepg for PostgreSQL).
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "retrysafe-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	// The application's handle (PostgreSQL: postgres.Open(os.Getenv("DATABASE_URL"))).
	gdb, err := gorm.Open(sqlite.Open("file:"+filepath.Join(dir, "app.db")+"?_pragma=journal_mode(WAL)"), &gorm.Config{})
	if err != nil {
		panic(err)
	}
	db, err := store.New(ctx, gdb, store.Config{}) // checks WAL / the PostgreSQL version
	if err != nil {
		panic(err)
	}
	defer db.Close()
	// The framework's own tables, and nothing of the demo's.
	if err := migrations.Up(ctx, db); err != nil {
		panic(err)
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{})
	if err != nil {
		panic(err)
	}
	fmt.Println(engine.DB().Driver.Name())
	// Output: sqlite
}
