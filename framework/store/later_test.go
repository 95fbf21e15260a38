package store_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// kvStore opens a store of its own on dialect with a table kv (k, v).
func kvStore(t *testing.T, dialect string) (*gorm.DB, *store.DB) {
	t.Helper()
	gdb := ownGorm(t, dialect, "journal_mode(WAL)")
	db, err := store.New(context.Background(), gdb, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	return gdb, db
}

// TestLater: a write queued with store.Later is seen by the transaction's
// next statement, commits with the transaction or not at all, and its error
// (wrapped) stops the commit, on both dialects; the pooled connection is
// clean afterwards.
func TestLater(t *testing.T) {
	t.Parallel()
	for _, dialect := range testdb.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			gdb, db := kvStore(t, dialect)
			type kv struct {
				K string `gorm:"primaryKey"`
				V int
			}
			later := func(tx *gorm.DB, k string, v int, wrap func(error) error) error {
				return store.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Table("kv").Create(&kv{K: k, V: v}) }, wrap)
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

			// store.Find as a transaction's first statement (sent with its
			// BEGIN on PostgreSQL), then after a queued write: rows come back
			// scanned, and a queued write's failure is the query's error.
			var got []kv
			if err := db.Write(ctx, func(tx *gorm.DB) error {
				if err := store.Find(tx, func(q *gorm.DB) *gorm.DB {
					return q.Raw("INSERT INTO kv (k, v) VALUES (?, ?) RETURNING k, v", "f", 8).Find(&got)
				}).Error; err != nil {
					return err
				}
				if err := later(tx, "g", 9, nil); err != nil {
					return err
				}
				var again []kv
				res := store.Find(tx, func(q *gorm.DB) *gorm.DB {
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
				return store.Find(tx, func(q *gorm.DB) *gorm.DB { return q.Table("kv").Find(&rows) }).Error
			})
			if !errors.Is(err, dup) {
				t.Fatalf("Find after a failing queued write = %v, want the write's error", err)
			}

			// A model with a gorm hook that writes: the hook's write
			// happens (Later runs such a write now, hooks included).
			if err := db.Write(ctx, func(tx *gorm.DB) error {
				return store.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Table("kv").Create(&hookedKV{K: "h", V: 7}) }, nil)
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
		})
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

// BenchmarkWriteThreeInserts is one transaction of three inserts whose
// answers nothing reads, written plainly (a round trip each, plus BEGIN and
// COMMIT on their own before pipelining) and queued with store.Later (on
// PostgreSQL: one round trip in all).
func BenchmarkWriteThreeInserts(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			ctx := context.Background()
			gdb := ownGorm(b, dialect, "journal_mode(WAL)")
			db, err := store.New(ctx, gdb, store.Config{})
			if err != nil {
				b.Fatal(err)
			}
			if err := gdb.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
				b.Fatal(err)
			}
			type kv struct {
				K string `gorm:"primaryKey"`
				V int
			}
			n := 0
			for _, mode := range []string{"plain", "later"} {
				b.Run(mode, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						err := db.Write(ctx, func(tx *gorm.DB) error {
							for range 3 {
								n++
								row := &kv{K: strconv.Itoa(n), V: n}
								var err error
								if mode == "plain" {
									err = tx.Table("kv").Create(row).Error
								} else {
									err = store.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Table("kv").Create(row) }, nil)
								}
								if err != nil {
									return err
								}
							}
							return nil
						})
						if err != nil {
							b.Fatal(err)
						}
					}
				})
			}
		})
	}
}

// TestLockTimeoutHoldsForAFreshStatement: the first time a connection sends
// a statement, pgx prepares it in a round trip of its own; were that sent
// before the transaction's BEGIN and SET LOCAL lock_timeout, parsing an
// INSERT into a table locked by another session would wait for the request
// deadline instead of the lock timeout. Each case runs on a fresh pool, so
// every statement is new to its connection.
func TestLockTimeoutHoldsForAFreshStatement(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t)
	ctx := context.Background()
	dsn := testdb.New(t, "postgres")
	setup, err := store.Open(ctx, dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = setup.Close() })
	if err := setup.Gorm.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	holder, err := setup.SQL().Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = holder.ExecContext(ctx, "ROLLBACK")
		_ = holder.Close()
	})
	for _, stmt := range []string{"BEGIN", "LOCK TABLE kv IN EXCLUSIVE MODE"} {
		if _, err := holder.ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	cases := map[string]func(tx *gorm.DB) error{
		"Exec": func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", "a", 1).Error },
		"Later": func(tx *gorm.DB) error {
			return store.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", "b", 2) }, nil)
		},
		"Find": func(tx *gorm.DB) error {
			var ks []string
			return store.Find(tx, func(q *gorm.DB) *gorm.DB {
				return q.Raw("INSERT INTO kv (k, v) VALUES (?, ?) RETURNING k", "c", 3).Find(&ks)
			}).Error
		},
	}
	for name, fn := range cases {
		t.Run(name, func(t *testing.T) {
			db, err := store.Open(ctx, dsn, store.Config{LockTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			start := time.Now()
			err = db.Write(wctx, fn)
			if waited := time.Since(start); !errors.Is(err, store.ErrLockTimeout) || waited > 5*time.Second {
				t.Fatalf("Write on a locked table = %v after %v, want ErrLockTimeout after about 200ms", err, waited)
			}
		})
	}
}

// TestExecAndLaterExec: store.LaterExec queues a ?-placeholder write and
// store.Exec runs one after it and returns the rows it affected, in the
// transaction's order, as gorm's Exec would (an IN ? list included), on
// both dialects; an error of a queued write stops the commit, wrapped.
func TestExecAndLaterExec(t *testing.T) {
	t.Parallel()
	for _, dialect := range testdb.Dialects() {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			gdb, db := kvStore(t, dialect)
			var updated, listed int64
			err := db.Write(ctx, func(tx *gorm.DB) error {
				for _, k := range []string{"a", "b", "c"} {
					if err := store.LaterExec(tx, "INSERT INTO kv (k, v) VALUES (?, ?)", []any{k, 1}, nil); err != nil {
						return err
					}
				}
				var err error
				if updated, err = store.Exec(tx, "UPDATE kv SET v = v + ? WHERE v = ?", 10, 1); err != nil {
					return err
				}
				listed, err = store.Exec(tx, "UPDATE kv SET v = v + 1 WHERE k IN ?", []string{"a", "b"})
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
				if err := store.LaterExec(tx, "INSERT INTO kv (k, v) VALUES (?, ?)", []any{"d", 1}, nil); err != nil {
					return err
				}
				return store.LaterExec(tx, "INSERT INTO kv (k, v) VALUES (?, ?)", []any{"a", 1},
					func(err error) error { return fmt.Errorf("%w: %v", dup, err) })
			})
			var n int64
			if err := gdb.Table("kv").Where("k = ?", "d").Count(&n).Error; err != nil {
				t.Fatal(err)
			}
			if !errors.Is(err, dup) || n != 0 {
				t.Fatalf("a failed queued write: %v, and %d rows of its transaction committed", err, n)
			}
		})
	}
}
