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

	"github.com/retrysafe/retrysafe/framework/store/storemysql"
)

// database is where one bench run keeps its data: a fresh PostgreSQL
// database created on the server of -db and dropped at the end (so that
// pg_stat_database counts this run's commits and nothing else), a fresh
// MariaDB database likewise, or a fresh SQLite file.
type database struct {
	DSN     string
	Dialect string
	name    string  // the PostgreSQL or MariaDB database's name
	admin   *sql.DB // on the -db database, never on the measured one
	// inspect reads the server's WAL through pg_walinspect, installed in
	// the measured database (dropped with it); nil where the extension is
	// not available (before PostgreSQL 15, or without the right to
	// create it). It keeps no connection open between two uses.
	inspect *sql.DB
	// slot is the session holding the temporary replication slot (named
	// as the database) that keeps the WAL inspect reads; nil without one.
	slot *sql.Conn
	// innodbWrites: InnoDB's trx_commits_insert_update counter is on
	// (MariaDB), which writesMark reads.
	innodbWrites bool
	dir          string // the SQLite file's temporary folder
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
	if strings.HasPrefix(dsn, storemysql.Scheme) {
		return openMariaDB(ctx, dsn)
	}
	if !strings.HasPrefix(dsn, "postgres://") && !strings.HasPrefix(dsn, "postgresql://") {
		return nil, fmt.Errorf("bench: -db must be sqlite:PATH, a postgres:// URL or a mysql:// URL, not %q", dsn)
	}
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		return nil, err
	}
	name, measured, err := createDatabase(ctx, admin, dsn, "CREATE DATABASE %s TEMPLATE template0")
	if err != nil {
		return nil, err
	}
	d := &database{DSN: measured, Dialect: "postgres", name: name, admin: admin}
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

// createDatabase creates a database named retrysafe_bench_ and 12 random
// hex digits on the server of admin, which is on dsn, with create (a
// CREATE DATABASE statement whose %s is the name), and returns the name
// and dsn with its path changed to it. admin is closed when it fails.
func createDatabase(ctx context.Context, admin *sql.DB, dsn, create string) (name, measured string, err error) {
	var b [6]byte
	_, _ = rand.Read(b[:])
	name = "retrysafe_bench_" + hex.EncodeToString(b[:])
	u, err := url.Parse(dsn)
	if err == nil {
		_, err = admin.ExecContext(ctx, fmt.Sprintf(create, name))
	}
	if err != nil {
		_ = admin.Close()
		return "", "", fmt.Errorf("bench: create database %s: %w", name, err)
	}
	u.Path = "/" + name
	return name, u.String(), nil
}

// openMariaDB creates the run's database on the MariaDB server of dsn
// (utf8mb4 with a binary, no-pad collation, the tables' default: see
// migrations/mysql) and turns on the InnoDB counter of write transactions
// (see [database.writesMark]), which stays on.
func openMariaDB(ctx context.Context, dsn string) (*database, error) {
	admin, err := storemysql.OpenDB(dsn, 10*time.Second)
	if err != nil {
		return nil, err
	}
	name, measured, err := createDatabase(ctx, admin, dsn, "CREATE DATABASE %s CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin")
	if err != nil {
		return nil, err
	}
	d := &database{DSN: measured, Dialect: "mysql", name: name, admin: admin}
	// Without the right to set it (SUPER), write transactions are not
	// counted.
	_, err = admin.ExecContext(ctx, "SET GLOBAL innodb_monitor_enable = '"+innodbWriteCounter+"'")
	d.innodbWrites = err == nil
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

// unpinned runs fn, a bulk load, without the WAL pin, and pins again
// after it: no measured range is open while it runs, and the pin would keep
// every segment it writes (a 10M-row load kept 75 GB and filled the disk).
// The slot is dropped by name: closing d.slot only hands its session back
// to the pool.
func (d *database) unpinned(ctx context.Context, fn func() error) error {
	if d.slot != nil {
		if _, err := d.slot.ExecContext(ctx, "SELECT pg_drop_replication_slot($1)", d.name); err != nil {
			return fmt.Errorf("bench: drop the WAL pin: %w", err)
		}
		_ = d.slot.Close()
		d.slot = nil
		defer d.pinWAL(ctx)
	}
	return fn()
}

func (d *database) Close() error {
	if d.dir != "" {
		return os.RemoveAll(d.dir)
	}
	if d.admin == nil {
		return nil
	}
	defer d.admin.Close()
	if d.Dialect == "mysql" {
		_, err := d.admin.Exec("DROP DATABASE IF EXISTS " + d.name)
		return err
	}
	if d.inspect != nil {
		_ = d.inspect.Close()
	}
	if d.slot != nil {
		_ = d.slot.Close() // drops the temporary slot
	}
	_, err := d.admin.Exec("DROP DATABASE IF EXISTS " + d.name + " WITH (FORCE)")
	return err
}

// commits returns the transactions committed so far. On PostgreSQL they
// are the measured database's, less one per session (each backend commits
// one of its own while it starts): the caller idles the server's pool
// first, as backends publish their counters as they exit, and this waits
// for them to exit and for the counters to settle. On MariaDB they are the
// server's COMMIT statements ([database.mariaDBCommits]). -1 on SQLite.
//
// On PostgreSQL the wait is for the sessions named appName that started
// before the database's clock read before: the server's pool as it was
// idled, whose requests are the ones measured. A session the server (a
// relay) opened since is not waited for, nor is another server's, so
// that the wait ends as soon as the measured backends have exited. A
// backend still there after 30 s is an error: the count would miss its
// commits.
func (d *database) commits(ctx context.Context, before time.Time, appName string) (int64, error) {
	switch d.Dialect {
	case "sqlite":
		return -1, nil
	case "mysql":
		return d.mariaDBCommits(ctx)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var backends int
		if err := d.admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = $1 AND backend_type = 'client backend' AND application_name = $2 AND backend_start < $3`,
			d.name, appName, before).Scan(&backends); err != nil {
			return 0, err
		}
		if backends == 0 {
			break
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("bench: %d backends of the server (%s) were still there 30 s after its pool was idled: their commits cannot be counted", backends, appName)
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

// mariaDBCommits is the server's Com_commit: the COMMIT statements it
// ran, each the end of an explicit transaction (START TRANSACTION or
// autocommit off, as database/sql's BeginTx and the store's Write do). It
// is the counter that counts transactions exactly, one per commit, of the
// three MariaDB keeps: Handler_commit counts an engine's commit of every
// statement too (START TRANSACTION, two INSERTs, COMMIT add 3), and
// InnoDB's trx_*_commits counters (INFORMATION_SCHEMA.INNODB_METRICS) are
// incremented without synchronization, so that two commits at once on two
// cores can count one. Com_commit is kept per session and summed over the
// sessions when read, live, so no pool needs idling. It does not count a
// lone statement in autocommit (a replay's or a GET's SELECT: 0 commits,
// where PostgreSQL's xact_commit counts 1), and it is the server's, all
// databases': run the bench on a server of its own.
func (d *database) mariaDBCommits(ctx context.Context) (int64, error) {
	var name string
	var n int64
	err := d.admin.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Com_commit'").Scan(&name, &n)
	return n, err
}

// innodbWriteCounter is InnoDB's count of committed transactions that
// wrote (an insert, update or delete: an undo log), off by default.
const innodbWriteCounter = "trx_commits_insert_update"

// writeMark is where the count of write transactions stood: a WAL insert
// position on PostgreSQL, InnoDB's counter of write transactions on
// MariaDB. The zero writeMark is unmeasured (SQLite, PostgreSQL without
// pg_walinspect, MariaDB without the right to turn the counter on).
type writeMark struct {
	lsn string
	n   int64
	ok  bool
}

// writesMark returns the count's current mark. On MariaDB it reads
// innodbWriteCounter: the transactions that wrote, each a commit that
// waits for its redo log flush (innodb_flush_log_at_trx_commit=1), as a
// commit record in PostgreSQL's WAL. A rolled-back write counts too
// (InnoDB ends a rollback by committing the undone transaction), the
// counter is the server's, and it is incremented without synchronization,
// so two commits at once could count one: it is a figure, Com_commit the
// exact count.
func (d *database) writesMark(ctx context.Context) (writeMark, error) {
	switch {
	case d.Dialect == "mysql" && d.innodbWrites:
		var n int64
		var on bool
		err := d.admin.QueryRowContext(ctx, "SELECT count, enabled FROM information_schema.INNODB_METRICS WHERE name = ?",
			innodbWriteCounter).Scan(&n, &on)
		return writeMark{n: n, ok: on}, err
	case d.Dialect == "postgres":
		lsn, err := d.walPosition(ctx)
		return writeMark{lsn: lsn, ok: lsn != ""}, err
	}
	return writeMark{}, nil
}

// writesBetween counts the write transactions committed between two
// marks, -1 when not measured.
func (d *database) writesBetween(ctx context.Context, from, to writeMark) (int64, error) {
	switch {
	case !from.ok || !to.ok:
		return -1, nil
	case d.Dialect == "mysql":
		return to.n - from.n, nil
	}
	return d.walCommits(ctx, from.lsn, to.lsn)
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

// now reads the database's clock.
func (d *database) now(ctx context.Context) (time.Time, error) {
	var t time.Time
	err := d.admin.QueryRowContext(ctx, "SELECT clock_timestamp()").Scan(&t)
	return t, err
}

// serverAppName is the application_name of a bench server's sessions:
// the one that reads the standby (-replica) has a name of its own.
func serverAppName(replica bool) string {
	if replica {
		return "retrysafe-bench-replica"
	}
	return "retrysafe-bench"
}

// serverDSN is the DSN a bench server opens: on PostgreSQL it names the
// sessions (serverAppName), so that [database.commits] can tell the
// server's backends from every other.
func (d *database) serverDSN(replica bool) (string, error) {
	if d.Dialect != "postgres" {
		return d.DSN, nil
	}
	u, err := url.Parse(d.DSN)
	if err != nil {
		return "", fmt.Errorf("bench: -db: %w", err)
	}
	q := u.Query()
	q.Set("application_name", serverAppName(replica))
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// replicaDSN returns dsn, a URL of a hot standby of the -db server, with
// its path changed to the run's database, which the standby replays.
func (d *database) replicaDSN(dsn string) (string, error) {
	u, err := url.Parse(dsn)
	if err != nil {
		return "", fmt.Errorf("bench: -replica: %w", err)
	}
	u.Path = "/" + d.name
	return u.String(), nil
}

// waitReplayed returns once the standby at replica has applied every WAL
// record the primary had written when it was called (a minute at most).
func (d *database) waitReplayed(ctx context.Context, replica string) error {
	var lsn string
	if err := d.admin.QueryRowContext(ctx, "SELECT pg_current_wal_lsn()::text").Scan(&lsn); err != nil {
		return err
	}
	standby, err := sql.Open("pgx", replica)
	if err != nil {
		return err
	}
	defer standby.Close()
	for deadline := time.Now().Add(time.Minute); ; {
		var done bool
		err := standby.QueryRowContext(ctx, "SELECT pg_is_in_recovery() AND pg_last_wal_replay_lsn() >= $1::pg_lsn", lsn).Scan(&done)
		if err == nil && done {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("bench: the standby of -replica has not applied %s within a minute (in recovery and caught up: %v, %v)", lsn, done, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
