package main

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the admin connection
)

// database is where one bench run keeps its data: a fresh PostgreSQL
// database created on the server of -db and dropped at the end (so that
// pg_stat_database counts this run's commits and nothing else), or a fresh
// SQLite file.
type database struct {
	DSN     string
	Dialect string
	name    string  // the PostgreSQL database's name
	admin   *sql.DB // on the -db database, never on the measured one
	// inspect reads the server's WAL through pg_walinspect, installed in
	// the measured database (dropped with it); nil where the extension is
	// not available (before PostgreSQL 15, or without the right to
	// create it). It keeps no connection open between two uses.
	inspect *sql.DB
	// slot is the session holding the temporary replication slot (named
	// as the database) that keeps the WAL inspect reads; nil without one.
	slot *sql.Conn
	dir  string // the SQLite file's temporary folder
}

func openDatabase(ctx context.Context, dsn string) (*database, error) {
	if dsn == "" || strings.HasPrefix(dsn, "sqlite:") {
		path := strings.TrimPrefix(dsn, "sqlite:")
		d := &database{Dialect: "sqlite"}
		if path == "" {
			dir, err := os.MkdirTemp("", "retrysafe-bench-")
			if err != nil {
				return nil, err
			}
			d.dir, path = dir, filepath.Join(dir, "bench.db")
		}
		d.DSN = "sqlite:" + path
		return d, nil
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return nil, fmt.Errorf("bench: -db must be sqlite:PATH or a postgres:// URL, not %q", dsn)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "retrysafe_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.ExecContext(ctx, "CREATE DATABASE "+name+" TEMPLATE template0"); err != nil {
		_ = admin.Close()
		return nil, fmt.Errorf("bench: create database %s: %w", name, err)
	}
	u, err := url.Parse(dsn)
	if err != nil {
		_ = admin.Close()
		return nil, err
	}
	u.Path = "/" + name
	d := &database{DSN: u.String(), Dialect: "postgres", name: name, admin: admin}
	if inspect, err := sql.Open("pgx", d.DSN); err == nil {
		inspect.SetMaxIdleConns(0)
		if _, err := inspect.ExecContext(ctx, "CREATE EXTENSION IF NOT EXISTS pg_walinspect"); err == nil {
			d.inspect = inspect
			d.pinWAL(ctx)
		} else {
			_ = inspect.Close()
		}
	}
	return d, nil
}

// pinWAL keeps the WAL that walCommits will read: a checkpoint removes old
// WAL segments, and on a busy server (a test suite dropping databases,
// each drop a checkpoint) one did so between a scenario's start and the
// read of its WAL. A temporary physical replication slot, created on a
// connection held for the run (PostgreSQL drops it when that session
// ends), retains the WAL from its position; walCommits moves it on past
// each range it read. Without the right to create a slot the WAL is read
// unpinned, as before.
func (d *database) pinWAL(ctx context.Context) {
	conn, err := d.admin.Conn(ctx)
	if err != nil {
		return
	}
	if _, err := conn.ExecContext(ctx, "SELECT pg_create_physical_replication_slot($1, true, true)", d.name); err != nil {
		_ = conn.Close()
		return
	}
	d.slot = conn
}

func (d *database) Close() error {
	if d.dir != "" {
		return os.RemoveAll(d.dir)
	}
	if d.admin == nil {
		return nil
	}
	defer d.admin.Close()
	if d.inspect != nil {
		_ = d.inspect.Close()
	}
	if d.slot != nil {
		_ = d.slot.Close() // drops the temporary slot
	}
	_, err := d.admin.Exec("DROP DATABASE IF EXISTS " + d.name + " WITH (FORCE)")
	return err
}

// commits returns the transactions committed in the measured database so
// far, less one per session (each backend commits one of its own while it
// starts). The caller idles the server's pool first: backends publish
// their counters as they exit, so this waits for them to exit and for the
// counters to settle. -1 on SQLite.
func (d *database) commits(ctx context.Context) (int64, error) {
	if d.admin == nil {
		return -1, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); {
		var backends int
		if err := d.admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = $1 AND backend_type = 'client backend'`, d.name).Scan(&backends); err != nil {
			return 0, err
		}
		if backends == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	last, stable := int64(-1), 0
	for stable < 4 {
		var n int64
		if err := d.admin.QueryRowContext(ctx, "SELECT xact_commit - sessions FROM pg_stat_database WHERE datname = $1", d.name).Scan(&n); err != nil {
			return 0, err
		}
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	return last, nil
}

// walPosition returns the server's WAL insert position, once flushed (""
// on SQLite or without pg_walinspect). Taken after [database.commits] has
// idled the pool, every commit of the measured requests lies before it.
// The insert position is a record's boundary; the flush position may fall
// inside a record, and a range that starts there can hold no record
// pg_walinspect finds ("could not find a valid record after …": with a
// scenario that writes nothing, the range is other databases' WAL alone).
// pg_walinspect reads only flushed WAL, so it waits for the flush (the WAL
// writer flushes within its delay, 200 ms by default) for up to 5 s.
func (d *database) walPosition(ctx context.Context) (string, error) {
	if d.inspect == nil {
		return "", nil
	}
	var lsn string
	if err := d.admin.QueryRowContext(ctx, "SELECT pg_current_wal_insert_lsn()::text").Scan(&lsn); err != nil {
		return "", err
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		var flushed bool
		if err := d.admin.QueryRowContext(ctx, "SELECT pg_current_wal_flush_lsn() >= $1::pg_lsn", lsn).Scan(&flushed); err != nil {
			return "", err
		}
		if flushed {
			break
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return lsn, nil
}

// walCommits counts the commit records written to the WAL between two
// positions: the transactions that wrote something, each a commit that
// waits for its flush. A transaction that only read writes no commit
// record (pg_stat_database counts it all the same). The WAL is the
// server's, so this counts the commits of every database on it: run the
// bench on a server of its own, as for the PostgreSQL CPU figure. -1 when
// not measured.
func (d *database) walCommits(ctx context.Context, from, to string) (int64, error) {
	if d.inspect == nil || from == "" || to == "" {
		return -1, nil
	}
	if from == to { // nothing written (and PostgreSQL refuses the range)
		return 0, nil
	}
	var (
		n   int64
		err error
	)
	// A read that fails all the same (a range not flushed after 5 s) is
	// tried again, and after five failures the figure of this sample is
	// left unmeasured rather than fail the run.
	for try := 0; try < 5; try++ {
		if try > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		err = d.inspect.QueryRowContext(ctx, `SELECT coalesce(sum(count), 0) FROM pg_get_wal_stats($1::pg_lsn, $2::pg_lsn, true)
WHERE "resource_manager/record_type" = 'Transaction/COMMIT'`, from, to).Scan(&n)
		if err == nil || ctx.Err() != nil {
			break
		}
	}
	if err != nil {
		return -1, ctx.Err()
	}
	if d.slot != nil {
		// Read: the WAL before to may go.
		if _, err := d.slot.ExecContext(ctx, "SELECT pg_replication_slot_advance($1, $2::pg_lsn)", d.name, to); err != nil {
			return -1, err
		}
	}
	return n, nil
}
