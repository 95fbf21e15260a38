package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestMariaDBMeterCountsEachCommit: on MariaDB the commit meter counts
// every COMMIT once, concurrent ones included, and a statement in
// autocommit or a rolled-back transaction not at all; the write meter
// counts the transactions that wrote, a rolled-back one included. The
// counters are the server's, so
// this test runs alone in its package (not in parallel), and another
// client's commits during an attempt (a test of another package) can
// only add to them: such an attempt is made again, one that counts less
// than it should fails.
func TestMariaDBMeterCountsEachCommit(t *testing.T) {
	ctx := context.Background()
	d, err := openDatabase(ctx, testdb.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	db, err := bulkDB(d)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(8)
	if _, err := db.ExecContext(ctx, "CREATE TABLE meter (k INT PRIMARY KEY)"); err != nil {
		t.Fatal(err)
	}
	if !d.innodbWrites {
		t.Fatalf("the InnoDB counter %s could not be turned on", innodbWriteCounter)
	}
	const writers, perWriter = 4, 25
	next := 0
	// read reads both counters.
	read := func() (int64, writeMark) {
		c, err := d.commits(ctx, time.Time{}, "")
		if err != nil {
			t.Fatal(err)
		}
		w, err := d.writesMark(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return c, w
	}
	attempt := func() (commits, writes int64) {
		c0, w0 := read()
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for range writers {
			first := next
			next += perWriter
			wg.Go(func() {
				for k := first; k < first+perWriter; k++ {
					if err := inTx(ctx, db, func(tx *sql.Tx) error {
						_, err := tx.ExecContext(ctx, "INSERT INTO meter VALUES (?)", k)
						return err
					}); err != nil {
						errs <- err
						return
					}
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		for range 10 { // autocommit reads: no COMMIT, nothing written
			var n int
			if err := db.QueryRowContext(ctx, "SELECT count(*) FROM meter").Scan(&n); err != nil {
				t.Fatal(err)
			}
		}
		// A read-only transaction: one COMMIT, nothing written.
		if err := inTx(ctx, db, func(tx *sql.Tx) error {
			var n int
			return tx.QueryRowContext(ctx, "SELECT count(*) FROM meter").Scan(&n)
		}); err != nil {
			t.Fatal(err)
		}
		// A rolled-back write: no COMMIT. InnoDB ends a rollback by
		// committing the undone transaction, which the write counter
		// counts most of the time, not always (one run of the suite
		// counted 100 writes here).
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.ExecContext(ctx, "INSERT INTO meter VALUES (-1)"); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		c1, w1 := read()
		w, err := d.writesBetween(ctx, w0, w1)
		if err != nil {
			t.Fatal(err)
		}
		return c1 - c0, w
	}
	// The writes: the committed inserts, and the rollback's undo when
	// InnoDB counts it.
	const wantCommits, wantWrites = writers*perWriter + 1, writers * perWriter
	var tries []string
	for range 5 {
		commits, writes := attempt()
		tries = append(tries, fmt.Sprintf("%d commits, %d writes", commits, writes))
		if commits < wantCommits || writes < wantWrites {
			t.Fatalf("counted %s; want %d commits, %d or %d writes", tries[len(tries)-1], wantCommits, wantWrites, wantWrites+1)
		}
		if commits == wantCommits && writes <= wantWrites+1 {
			return
		}
	}
	t.Fatalf("every attempt counted more than %d commits and %d writes (another client of the server?): %v", wantCommits, wantWrites+1, tries)
}

// inTx runs fn in a transaction of db and commits it.
func inTx(ctx context.Context, db *sql.DB, fn func(*sql.Tx) error) error {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	if err := fn(tx); err != nil {
		_ = tx.Rollback()
		return err
	}
	return tx.Commit()
}

// TestPostgresMeterWaitsForTheServersBackends: on PostgreSQL a backend
// publishes its transaction counters at most once a second while it
// runs, and in full as it exits, so the meter waits for the server's
// backends to be gone, however long one takes to exit, and for no other
// session. Here a session of the server commits 20 statements, then is
// busy for 4 s, then closes: the count has all 21 only if it waited for
// that backend to exit. A session of another server stays open
// throughout; waiting for it would end in the meter's error.
func TestPostgresMeterWaitsForTheServersBackends(t *testing.T) {
	ctx := context.Background()
	d, err := openDatabase(ctx, testdb.Postgres(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	connect := func(replica bool) *pgx.Conn {
		dsn, err := d.serverDSN(replica)
		if err != nil {
			t.Fatal(err)
		}
		conn, err := pgx.Connect(ctx, dsn)
		if err != nil {
			t.Fatal(err)
		}
		return conn
	}
	other := connect(true)
	defer other.Close(ctx)
	count := func() int64 {
		before, err := d.now(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c, err := d.commits(ctx, before, serverAppName(false))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c0 := count()
	conn := connect(false)
	const statements = 20
	for range statements {
		if _, err := conn.Exec(ctx, "SELECT 1"); err != nil {
			t.Fatal(err)
		}
	}
	closed := make(chan error, 1)
	go func() {
		_, err := conn.Exec(ctx, "SELECT pg_sleep(4)")
		closed <- errors.Join(err, conn.Close(ctx))
	}()
	got := count() - c0
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if got != statements+1 {
		t.Fatalf("counted %d commits, want %d", got, statements+1)
	}
}
