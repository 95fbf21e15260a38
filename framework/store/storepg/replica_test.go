package storepg_test

import (
	"context"
	"testing"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/plugin/dbresolver"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/pgha"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestReplicaHandles: on a primary with a hot standby, the store's own
// handle reads the primary and its replica handle the standby, whether the
// application names the replica (Config.Replica, Config.ReplicaDSN) or
// registers gorm.io/plugin/dbresolver with the standby as its replica on
// the handle it gives store.New; there the framework's reads through
// DB.Gorm, a SELECT outside a transaction included, stay on the primary,
// while the application's own handle keeps dbresolver's routing.
func TestReplicaHandles(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t) // part of the PostgreSQL suite: skip without TEST_DATABASE_URL
	f := pgha.Start(t, pgha.Config{})
	primary, standby := f.NodeURL(f.Primary()), f.NodeURL(f.Standby())
	ctx := context.Background()
	inRecovery := func(name string, gdb *gorm.DB) bool {
		t.Helper()
		var r bool
		if err := gdb.WithContext(ctx).Raw("SELECT pg_is_in_recovery()").Scan(&r).Error; err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		return r
	}
	want := func(how string, db *store.DB) {
		t.Helper()
		if db.Replica() == nil {
			t.Fatalf("%s: no replica handle", how)
		}
		for range 5 { // dbresolver picks a source per statement
			if inRecovery(how+": DB.Gorm", db.Gorm) {
				t.Fatalf("%s: DB.Gorm read the standby", how)
			}
			if !inRecovery(how+": DB.Replica", db.Replica()) {
				t.Fatalf("%s: DB.Replica read the primary", how)
			}
		}
		// A write transaction still works on the pinned handle.
		if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("CREATE TABLE IF NOT EXISTS replica_probe (k int)").Error }); err != nil {
			t.Fatalf("%s: write: %v", how, err)
		}
	}

	db, err := store.Open(ctx, primary, store.Config{ReplicaDSN: standby})
	if err != nil {
		t.Fatal(err)
	}
	want("ReplicaDSN", db)
	_ = db.Close()

	replica, err := gorm.Open(postgres.Open(standby), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	own, err := gorm.Open(postgres.Open(primary), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	db, err = store.New(ctx, own, store.Config{Replica: replica})
	if err != nil {
		t.Fatal(err)
	}
	want("Replica", db)

	resolved, err := gorm.Open(postgres.Open(primary), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := resolved.Use(dbresolver.Register(dbresolver.Config{Replicas: []gorm.Dialector{postgres.Open(standby)}})); err != nil {
		t.Fatal(err)
	}
	db, err = store.New(ctx, resolved, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	want("dbresolver", db)
	if !inRecovery("the application's handle", resolved) {
		t.Fatal("the application's own handle no longer reads dbresolver's replica")
	}

	// Without a replica the store has no replica handle: every read is
	// the primary's.
	plain, err := gorm.Open(postgres.Open(primary), &gorm.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if db, err = store.New(ctx, plain, store.Config{}); err != nil || db.Replica() != nil {
		t.Fatalf("store.New without a replica: replica %v, err %v", db.Replica(), err)
	}
}
