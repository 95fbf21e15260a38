package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// kvStore opens a store of its own on h with a table kv (k, v).
func kvStore(t *testing.T, h Harness) (*gorm.DB, *store.DB) {
	t.Helper()
	gdb := h.Gorm(t)
	db, err := store.New(context.Background(), gdb, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("CREATE TABLE kv (k VARCHAR(64) PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	return gdb, db
}

// testLater: a write queued with pipeline.Later is seen by the transaction's
// next statement, commits with the transaction or not at all, and its error
// (wrapped) stops the commit, on both dialects; the pooled connection is
// clean afterwards.
func testLater(t *testing.T, h Harness) {
	ctx := context.Background()
	gdb, db := kvStore(t, h)
	type kv struct {
		K string `gorm:"primaryKey"`
		V int
	}
	later := func(tx *gorm.DB, k string, v int, wrap func(error) error) error {
		return pipeline.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Table("kv").Create(&kv{K: k, V: v}) }, wrap)
	}
	count := func() int64 {
		t.Helper()
		var n int64
		if err := gdb.Table("kv").Count(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}

	// Queued, then read back by the same transaction: order holds.
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := later(tx, "a", 1, nil); err != nil {
			return err
		}
		var n int64
		if err := tx.Table("kv").Where("k = ?", "a").Count(&n).Error; err != nil || n != 1 {
			return errors.New("the queued insert is not visible to the next statement")
		}
		return later(tx, "b", 2, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if n := count(); n != 2 {
		t.Fatalf("rows = %d, want 2: a write queued before COMMIT was lost", n)
	}

	// fn fails after queueing: nothing commits.
	boom := errors.New("fn fails")
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := later(tx, "c", 3, nil); err != nil {
			return err
		}
		return boom
	}); !errors.Is(err, boom) {
		t.Fatalf("Write = %v, want fn's error", err)
	}

	// The queued write fails (duplicate key) after another write:
	// Write returns its error wrapped, nothing of the transaction
	// commits.
	dup := errors.New("duplicate")
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := tx.Table("kv").Create(&kv{K: "d", V: 4}).Error; err != nil {
			return err
		}
		return later(tx, "a", 5, func(err error) error { return errors.Join(dup, err) })
	})
	if !errors.Is(err, dup) {
		t.Fatalf("Write with a failing queued insert = %v, want it wrapped", err)
	}
	if n := count(); n != 2 {
		t.Fatalf("rows = %d, want 2: a transaction whose queued write failed committed", n)
	}

	// pipeline.Find as a transaction's first statement (sent with its
	// BEGIN on PostgreSQL), then after a queued write: rows come back
	// scanned, and a queued write's failure is the query's error.
	var got []kv
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.Find(tx, func(q *gorm.DB) *gorm.DB {
			return q.Raw("INSERT INTO kv (k, v) VALUES (?, ?) RETURNING k, v", "f", 8).Find(&got)
		}).Error; err != nil {
			return err
		}
		if err := later(tx, "g", 9, nil); err != nil {
			return err
		}
		var again []kv
		res := pipeline.Find(tx, func(q *gorm.DB) *gorm.DB {
			return q.Table("kv").Where("k IN ?", []string{"f", "g"}).Order("k").Find(&again)
		})
		if res.Error != nil || res.RowsAffected != 2 || again[1].V != 9 {
			return fmt.Errorf("Find after a queued write: %v, %d rows, %+v", res.Error, res.RowsAffected, again)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].K != "f" || got[0].V != 8 {
		t.Fatalf("RETURNING through Find: %+v", got)
	}
	err = db.Write(ctx, func(tx *gorm.DB) error {
		if err := later(tx, "a", 10, func(err error) error { return errors.Join(dup, err) }); err != nil {
			return err
		}
		var rows []kv
		return pipeline.Find(tx, func(q *gorm.DB) *gorm.DB { return q.Table("kv").Find(&rows) }).Error
	})
	if !errors.Is(err, dup) {
		t.Fatalf("Find after a failing queued write = %v, want the write's error", err)
	}

	// A model with a gorm hook that writes: the hook's write
	// happens (Later runs such a write now, hooks included).
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		return pipeline.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Table("kv").Create(&hookedKV{K: "h", V: 7}) }, nil)
	}); err != nil {
		t.Fatal(err)
	}
	var audited int
	if err := gdb.Raw("SELECT v FROM kv WHERE k = 'h-audit'").Scan(&audited).Error; err != nil || audited != 7 {
		t.Fatalf("the AfterCreate hook's row = %d (%v), want 7", audited, err)
	}

	// A transaction that wrote nothing, then the pool is healthy:
	// every connection comes back out of any transaction.
	for range 5 {
		if err := db.Write(ctx, func(*gorm.DB) error { return nil }); err != nil {
			t.Fatal(err)
		}
		if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("UPDATE kv SET v = v + 1 WHERE k = 'a'").Error }); err != nil {
			t.Fatal(err)
		}
	}
	var v int
	if err := gdb.Raw("SELECT v FROM kv WHERE k = 'a'").Scan(&v).Error; err != nil || v != 6 {
		t.Fatalf("v = %d (%v), want 6", v, err)
	}
}

// testExecAndLaterExec: pipeline.LaterExec queues a ?-placeholder write and
// pipeline.Exec runs one after it and returns the rows it affected, in the
// transaction's order, as gorm's Exec would (an IN ? list included), on
// both dialects; an error of a queued write stops the commit, wrapped.
func testExecAndLaterExec(t *testing.T, h Harness) {
	ctx := context.Background()
	gdb, db := kvStore(t, h)
	var updated, listed int64
	err := db.Write(ctx, func(tx *gorm.DB) error {
		for _, k := range []string{"a", "b", "c"} {
			if err := pipeline.LaterExec(tx, "INSERT INTO kv (k, v) VALUES (?, ?)", []any{k, 1}, nil); err != nil {
				return err
			}
		}
		var err error
		if updated, err = pipeline.Exec(tx, "UPDATE kv SET v = v + ? WHERE v = ?", 10, 1); err != nil {
			return err
		}
		listed, err = pipeline.Exec(tx, "UPDATE kv SET v = v + 1 WHERE k IN ?", []string{"a", "b"})
		return err
	})
	if err != nil || updated != 3 || listed != 2 {
		t.Fatalf("write: %v; rows affected %d and %d, want 3 and 2", err, updated, listed)
	}
	var sum int64
	if err := gdb.Raw("SELECT SUM(v) FROM kv").Scan(&sum).Error; err != nil || sum != 12+12+11 {
		t.Fatalf("sum of v = %d (%v), want 35", sum, err)
	}
	dup := errors.New("duplicate key")
	err = db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.LaterExec(tx, "INSERT INTO kv (k, v) VALUES (?, ?)", []any{"d", 1}, nil); err != nil {
			return err
		}
		return pipeline.LaterExec(tx, "INSERT INTO kv (k, v) VALUES (?, ?)", []any{"a", 1},
			func(err error) error { return fmt.Errorf("%w: %v", dup, err) })
	})
	var n int64
	if err := gdb.Table("kv").Where("k = ?", "d").Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	if !errors.Is(err, dup) || n != 0 {
		t.Fatalf("a failed queued write: %v, and %d rows of its transaction committed", err, n)
	}
}

// hookedKV writes an audit row from its AfterCreate hook.
type hookedKV struct {
	K string `gorm:"primaryKey"`
	V int
}

func (h *hookedKV) AfterCreate(tx *gorm.DB) error {
	return tx.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", h.K+"-audit", h.V).Error
}

// testQueryAfterAFailedWrite: a query after a queued write that fails
// cannot be sent (on a driver that pipelines, its Scan reports a cancelled
// context); Write still reports the write's own error, classified, not
// the echo (which would answer 500 instead of what the error means).
func testQueryAfterAFailedWrite(t *testing.T, h Harness) {
	ctx := context.Background()
	gdb, db := kvStore(t, h)
	if err := gdb.Exec("INSERT INTO kv (k, v) VALUES ('a', 1)").Error; err != nil {
		t.Fatal(err)
	}
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.LaterExec(tx, "INSERT INTO kv (k, v) VALUES (?, ?)", []any{"a", 2}, nil); err != nil {
			return err
		}
		var n int
		return tx.Raw("SELECT count(*) FROM kv").Row().Scan(&n)
	})
	if !errors.Is(err, store.ErrUniqueViolation) {
		t.Fatalf("Write = %v, want the queued write's ErrUniqueViolation", err)
	}
	var v int
	if err := gdb.Raw("SELECT v FROM kv WHERE k = 'a'").Scan(&v).Error; err != nil || v != 1 {
		t.Fatalf("v = %d (%v), want 1: nothing of the failed transaction committed", v, err)
	}
}
