package storepg_test

import (
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"gorm.io/driver/postgres"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// harness gives the contract suite a schema of its own per database on
// TEST_DATABASE_URL (the suite skips without it, and fails under CI).
var harness = storetest.Harness{
	Name:          "postgres",
	DSN:           func(tb testing.TB) string { return testdb.New(tb, "postgres") },
	Gorm:          ownGorm,
	RefusedQuery:  "SELECT CAST(? AS uuid)",
	RefusalQuotes: true,
}

// ownGorm opens a *gorm.DB the way an application does (gorm.io/driver/postgres),
// with none of the framework's DSN settings.
func ownGorm(tb testing.TB) *gorm.DB {
	tb.Helper()
	gdb, err := gorm.Open(postgres.Open(testdb.New(tb, "postgres")), &gorm.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() {
		if sqlDB, err := gdb.DB(); err == nil {
			_ = sqlDB.Close()
		}
	})
	return gdb
}

func TestContract(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t)
	storetest.Exercise(t, harness)
}

func TestOpenUnreachablePostgresIsUnavailable(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", store.Config{})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a closed port = %v, want ErrUnavailable", err)
	}
}

// TestSetLocalEndsWithTheTransaction: what Write sets (SET LOCAL) ends
// with the transaction: the pool's connections keep the server's default.
func TestSetLocalEndsWithTheTransaction(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t)
	ctx := context.Background()
	gdb := ownGorm(t)
	sqlDB, _ := gdb.DB()
	sqlDB.SetMaxOpenConns(1)
	db, err := store.New(ctx, gdb, store.Config{LockTimeout: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	var inside string
	if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Raw("SHOW lock_timeout").Scan(&inside).Error }); err != nil {
		t.Fatal(err)
	}
	if inside != "200ms" {
		t.Fatalf("lock_timeout inside Write = %q, want 200ms", inside)
	}
	var lt string
	if err := gdb.Raw("SHOW lock_timeout").Scan(&lt).Error; err != nil || lt != "0" {
		t.Fatalf("lock_timeout outside Write = %q (%v), want the default 0", lt, err)
	}
}

// BenchmarkWriteThreeInserts is one transaction of three inserts whose
// answers nothing reads, written plainly (a round trip each, plus BEGIN and
// COMMIT on their own before pipelining) and queued with pipeline.Later (on
// PostgreSQL: one round trip in all).
func BenchmarkWriteThreeInserts(b *testing.B) {
	testdb.Postgres(b)
	{
		{
			ctx := context.Background()
			gdb := ownGorm(b)
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
									err = pipeline.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Table("kv").Create(row) }, nil)
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
		}
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
			return pipeline.Later(tx, func(db *gorm.DB) *gorm.DB { return db.Exec("INSERT INTO kv (k, v) VALUES (?, ?)", "b", 2) }, nil)
		},
		"Find": func(tx *gorm.DB) error {
			var ks []string
			return pipeline.Find(tx, func(q *gorm.DB) *gorm.DB {
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
