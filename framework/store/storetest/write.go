package storetest

import (
	"context"
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// testWriteOnOwnGormDB: on the application's own handle, Write applies the
// lock timeout per transaction (a second writer times out, it does not
// wait for ever or fail at once), leaves nothing on the pooled connection
// afterwards, nests gorm transactions as savepoints, and rolls back on an
// error or a panic.
func testWriteOnOwnGormDB(t *testing.T, h Harness) {
	ctx := context.Background()
	gdb := h.Gorm(t)
	db, err := store.New(ctx, gdb, store.Config{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if db.Driver.Name() != h.Name {
		t.Fatalf("dialect %s, want %s", db.Driver.Name(), h.Name)
	}
	if err := gdb.Exec("CREATE TABLE kv (k VARCHAR(64) PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	type kv struct {
		K string `gorm:"primaryKey"`
		V int
	}
	// gorm's own default transaction and a nested Transaction
	// inside Write: one commit, the inner failure rolled back to
	// its savepoint.
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := tx.Table("kv").Create(&kv{K: "a", V: 1}).Error; err != nil {
			return err
		}
		inner := tx.Transaction(func(tx *gorm.DB) error {
			if err := tx.Table("kv").Create(&kv{K: "b", V: 2}).Error; err != nil {
				return err
			}
			return errors.New("inner fails")
		})
		if inner == nil {
			return errors.New("the inner transaction did not fail")
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := gdb.Table("kv").Count(&n).Error; err != nil || n != 1 {
		t.Fatalf("rows = %d (%v), want 1: the savepoint's row rolled back", n, err)
	}
	func() {
		defer func() {
			if recover() == nil {
				t.Fatal("the panic was swallowed")
			}
		}()
		_ = db.Write(ctx, func(tx *gorm.DB) error {
			tx.Exec("UPDATE kv SET v = 99")
			panic("boom")
		})
	}()
	var v int
	if err := gdb.Raw("SELECT v FROM kv WHERE k = 'a'").Scan(&v).Error; err != nil || v != 1 {
		t.Fatalf("v = %d (%v) after a panic, want 1", v, err)
	}
	if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Commit().Error }); err == nil {
		t.Fatal("fn committed Write's transaction itself")
	}

	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Write(ctx, func(tx *gorm.DB) error {
			if err := tx.Exec("UPDATE kv SET v = 2 WHERE k = 'a'").Error; err != nil {
				return err
			}
			close(held)
			<-release
			return nil
		})
	}()
	<-held
	start := time.Now()
	err = db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("UPDATE kv SET v = 3 WHERE k = 'a'").Error })
	waited := time.Since(start)
	close(release)
	if herr := <-done; herr != nil {
		t.Fatal(herr)
	}
	if !errors.Is(err, store.ErrLockTimeout) || waited < 100*time.Millisecond || waited > 5*time.Second {
		t.Fatalf("second writer = %v after %v, want ErrLockTimeout after about 200ms", err, waited)
	}
}

// testLockTimeoutAndRollback is what every dialect must do: a row lock held by
// one transaction makes a second writer fail with ErrLockTimeout after the
// lock timeout, not wait forever and not succeed; Write commits on nil and
// rolls back on error.
func testLockTimeoutAndRollback(t *testing.T, h Harness) {
	dsn := h.DSN(t)
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, store.Config{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Gorm.Exec("CREATE TABLE kv (k VARCHAR(64) PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv VALUES ('a', 1)").Error }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec("UPDATE kv SET v = 2").Error; err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want boom", err)
	}

	locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Write(ctx, func(tx *gorm.DB) error {
			var v int
			if err := db.Driver.LockRow(tx.Table("kv").Select("v").Where("k = ?", "a")).Scan(&v).Error; err != nil {
				return err
			}
			close(locked)
			<-release
			return nil
		})
	}()
	<-locked
	start := time.Now()
	err = db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("UPDATE kv SET v = v + 10 WHERE k = 'a'").Error })
	waited := time.Since(start)
	close(release)
	if herr := <-done; herr != nil {
		t.Fatal(herr)
	}
	if !errors.Is(err, store.ErrLockTimeout) {
		t.Fatalf("second writer = %v, want ErrLockTimeout", err)
	}
	if waited > 5*time.Second {
		t.Fatalf("second writer waited %v, far past the lock timeout", waited)
	}
	var v int
	if err := db.Gorm.Raw("SELECT v FROM kv WHERE k = 'a'").Scan(&v).Error; err != nil || v != 1 {
		t.Fatalf("v = %d (%v), want 1: the rollback and the timed-out write left no trace", v, err)
	}
}

// testWriteUnderCancellation ends the context of
// many writes at random points: before, during and after fn, around COMMIT.
// Every Write that returned nil must have committed its row, and the pool
// must stay usable (no transaction left open on a pooled connection). On
// SQLite, whose COMMIT runs to its end, nothing else commits; on
// PostgreSQL a COMMIT cut by the context is ambiguous (the server may have
// committed), so Write reports an error (503, retried with the same key or
// ID) for a row that may exist.
func testWriteUnderCancellation(t *testing.T, h Harness) {
	dsn := h.DSN(t)
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, store.Config{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := db.Gorm.Exec("CREATE TABLE acked (v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	acked := map[int64]bool{}
	n := 600 // a network round trip each
	if h.Embedded {
		n = 20000
	}
	for i := range n {
		wctx, cancel := context.WithCancel(ctx)
		inFn := i%3 == 0
		if !inFn {
			time.AfterFunc(time.Duration(rand.IntN(400))*time.Microsecond, cancel)
		}
		err := db.Write(wctx, func(tx *gorm.DB) error {
			if err := tx.Exec("INSERT INTO acked (v) VALUES (?)", i).Error; err != nil {
				return err
			}
			if inFn {
				cancel() // the client goes away after the last statement
			}
			return nil
		})
		cancel()
		if err == nil {
			acked[int64(i)] = true
		}
	}
	// The pool is clean: an ordinary write succeeds on it.
	for range 8 {
		if err := db.Write(ctx, func(tx *gorm.DB) error { return nil }); err != nil {
			t.Fatalf("a write after the cancelled ones: %v", err)
		}
	}
	var committed []int64
	if err := db.Gorm.Table("acked").Pluck("v", &committed).Error; err != nil {
		t.Fatal(err)
	}
	stored := map[int64]bool{}
	for _, v := range committed {
		stored[v] = true
	}
	for v := range acked {
		if !stored[v] {
			t.Fatalf("write %d was acknowledged but is not committed", v)
		}
	}
	if h.Embedded && len(committed) != len(acked) {
		t.Fatalf("%d rows committed for %d acknowledged writes", len(committed), len(acked))
	}
	t.Logf("%d of %d writes acknowledged, %d committed", len(acked), n, len(committed))
}
