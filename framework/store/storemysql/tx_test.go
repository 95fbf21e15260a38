package storemysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// setup opens a database of the test's own with a table t (k INT primary
// key, v INT) holding rows 1 and 20.
func setup(t *testing.T) *sql.DB {
	t.Helper()
	db, err := storemysql.OpenDB(testdb.New(t, "mysql"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	for _, stmt := range []string{
		"CREATE TABLE t (k INT PRIMARY KEY, v INT NOT NULL, s VARCHAR(8)) ENGINE = InnoDB DEFAULT CHARSET = utf8mb4",
		"INSERT INTO t (k, v) VALUES (1, 0), (20, 0)",
	} {
		if _, err := db.Exec(stmt); err != nil {
			t.Fatal(err)
		}
	}
	return db
}

func conn(t *testing.T, db *sql.DB) *sql.Conn {
	t.Helper()
	c, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// holdRow1 begins a transaction on a connection of its own that updates
// row 1 of t (v + 1) and so holds its lock until the caller ends it.
func holdRow1(t *testing.T, db *sql.DB) *storemysql.Tx {
	t.Helper()
	ctx := context.Background()
	holder, err := storemysql.Begin(ctx, conn(t, db), time.Second, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE k = 1"); err != nil {
		t.Fatal(err)
	}
	return holder
}

type session struct {
	LockWait  int64
	Statement float64
	Isolation string
}

func readSession(t *testing.T, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}) session {
	t.Helper()
	var s session
	if err := q.QueryRowContext(context.Background(), "SELECT @@session.innodb_lock_wait_timeout, @@session.max_statement_time, @@session.tx_isolation").
		Scan(&s.LockWait, &s.Statement, &s.Isolation); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestTransactionSettingsAreItsOwn: a transaction runs READ COMMITTED with
// its own lock and statement timeouts, and the session has its own values
// back afterwards, whether the transaction committed or rolled back, so
// that the application's use of its pool is unchanged.
func TestTransactionSettingsAreItsOwn(t *testing.T) {
	t.Parallel()
	db := setup(t)
	c := conn(t, db)
	ctx := context.Background()
	if _, err := c.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 7, SESSION max_statement_time = 0, SESSION tx_isolation = 'SERIALIZABLE'"); err != nil {
		t.Fatal(err)
	}
	own := readSession(t, c)
	for _, batched := range []bool{false, true} {
		for _, commit := range []bool{true, false} {
			var tx store.Tx
			if batched {
				tx = storemysql.BeginBatch(c, 1500*time.Millisecond, 5*time.Second)
			} else {
				var err error
				if tx, err = storemysql.Begin(ctx, c, 1500*time.Millisecond, 5*time.Second); err != nil {
					t.Fatal(err)
				}
			}
			if got := readSession(t, tx); got != (session{LockWait: 2, Statement: 5, Isolation: "READ-COMMITTED"}) {
				t.Fatalf("in the transaction (batched %v): %+v", batched, got)
			}
			if commit {
				if err := tx.Finish(ctx); err != nil {
					t.Fatal(err)
				}
			} else {
				tx.Abort(ctx)
			}
			if got := readSession(t, c); got != own {
				t.Fatalf("after the transaction (batched %v, commit %v): %+v, want %+v", batched, commit, got, own)
			}
		}
	}
}

// TestLockWaitIsALockTimeout: a statement that waits past the lock timeout
// for a row another transaction holds fails with error 1205, read as a
// lock timeout.
func TestLockWaitIsALockTimeout(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	holder := holdRow1(t, db)
	defer holder.Abort(ctx)
	waiter, err := storemysql.Begin(ctx, conn(t, db), time.Second, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Abort(ctx)
	_, err = waiter.ExecContext(ctx, "UPDATE t SET v = 2 WHERE k = 1")
	if k := storemysql.KindOf(err); k != storemysql.LockTimeout {
		t.Fatalf("waiting for the row: %v (kind %v), want a lock timeout", err, k)
	}
}

// TestDeadlockIsALockTimeoutAndEndsTheTransaction: of two transactions
// that lock two rows in opposite orders, InnoDB rolls one back whole with
// error 1213, read as a deadlock: store.ErrRolledBack beside
// store.ErrLockTimeout (nothing committed; the transaction may run again). The
// victim's later statements are not sent, as they would run outside any
// transaction; the other transaction commits.
func TestDeadlockIsALockTimeoutAndEndsTheTransaction(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	a, err := storemysql.Begin(ctx, conn(t, db), 10*time.Second, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	b, err := storemysql.Begin(ctx, conn(t, db), 10*time.Second, 20*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		tx  *storemysql.Tx
		sql string
	}{{a, "UPDATE t SET v = v + 1 WHERE k = 1"}, {b, "UPDATE t SET v = v + 1 WHERE k = 20"}} {
		if _, err := step.tx.ExecContext(ctx, step.sql); err != nil {
			t.Fatal(err)
		}
	}
	errs := make(chan error, 2)
	go func() { _, err := a.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE k = 20"); errs <- err }()
	go func() { _, err := b.ExecContext(ctx, "UPDATE t SET v = v + 1 WHERE k = 1"); errs <- err }()
	// The victim fails at once; the survivor waits for the victim's locks,
	// which its rollback frees.
	errA, errB := <-errs, <-errs
	victimErr := errA
	if victimErr == nil {
		victimErr = errB
	}
	if (errA == nil) == (errB == nil) || storemysql.KindOf(victimErr) != storemysql.Deadlock {
		t.Fatalf("errors %v and %v: want one deadlock, read as such", errA, errB)
	}
	if err := (storemysql.Driver{}).Classify(victimErr); !errors.Is(err, store.ErrRolledBack) || !errors.Is(err, store.ErrLockTimeout) {
		t.Fatalf("Classify(%v) = %v, want ErrRolledBack and ErrLockTimeout", victimErr, err)
	}
	victim, survivor := a, b
	if _, err := b.ExecContext(ctx, "SELECT 1"); err != nil {
		victim, survivor = b, a
	}
	if _, err := victim.ExecContext(ctx, "UPDATE t SET v = 100 WHERE k = 1"); err == nil {
		t.Fatal("the victim sent a statement after its transaction was rolled back")
	}
	if err := victim.Finish(ctx); err == nil {
		t.Fatal("the victim's Finish reported a commit")
	}
	if err := survivor.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	var sum int
	if err := db.QueryRow("SELECT SUM(v) FROM t").Scan(&sum); err != nil {
		t.Fatal(err)
	}
	if sum != 2 {
		t.Fatalf("sum of v = %d, want 2 (the survivor's two updates, none of the victim's)", sum)
	}
}

// TestNeighbouringInsertsDoNotWait: two transactions that each look for
// an absent key with a locking read and then insert it, two neighbouring
// keys in the same gap. Under InnoDB's REPEATABLE READ the locking reads
// take gap locks, and one of the two waits for the other (here: past a
// one-second lock timeout) or deadlocks; under the READ COMMITTED that a
// write transaction runs, neither waits and both commit.
func TestNeighbouringInsertsDoNotWait(t *testing.T) {
	t.Parallel()
	db := setup(t)
	ctx := context.Background()
	type execer interface {
		ExecContext(context.Context, string, ...any) (sql.Result, error)
		QueryContext(context.Context, string, ...any) (*sql.Rows, error)
	}
	run := func(repeatableRead bool, keys [2]int) (failed int) {
		var txs [2]execer
		var ends [2]func()
		for i := range txs {
			c := conn(t, db)
			if repeatableRead {
				if _, err := c.ExecContext(ctx, "SET SESSION tx_isolation = 'REPEATABLE-READ', SESSION innodb_lock_wait_timeout = 1"); err != nil {
					t.Fatal(err)
				}
				if _, err := c.ExecContext(ctx, "START TRANSACTION"); err != nil {
					t.Fatal(err)
				}
				txs[i], ends[i] = c, func() { _, _ = c.ExecContext(ctx, "ROLLBACK") }
				continue
			}
			tx, err := storemysql.Begin(ctx, c, time.Second, 5*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			txs[i] = tx
			ends[i] = func() {
				if err := tx.Finish(ctx); err != nil {
					failed++
				}
			}
		}
		step := func(i int, query string) {
			var err error
			if strings.HasPrefix(query, "SELECT") {
				var rows *sql.Rows
				if rows, err = txs[i].QueryContext(ctx, query, keys[i]); err == nil {
					err = rows.Close()
				}
			} else {
				_, err = txs[i].ExecContext(ctx, query, keys[i])
			}
			if err != nil {
				if k := storemysql.KindOf(err); k != storemysql.LockTimeout {
					t.Fatalf("%s: %v, want a lock timeout or none", query, err)
				}
				failed++
			}
		}
		step(0, "SELECT * FROM t WHERE k = ? FOR UPDATE")
		step(1, "SELECT * FROM t WHERE k = ? FOR UPDATE")
		step(0, "INSERT INTO t (k, v) VALUES (?, 0)")
		step(1, "INSERT INTO t (k, v) VALUES (?, 0)")
		ends[0]()
		ends[1]()
		return failed
	}
	if n := run(true, [2]int{10, 11}); n == 0 {
		t.Fatal("REPEATABLE READ: no transaction waited; the test no longer shows the gap lock")
	}
	if n := run(false, [2]int{12, 13}); n != 0 {
		t.Fatalf("READ COMMITTED: %d statements waited past the lock timeout", n)
	}
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t WHERE k IN (12, 13)").Scan(&n); err != nil || n != 2 {
		t.Fatalf("%d rows of the READ COMMITTED inserts, %v", n, err)
	}
}

// TestAWholeTransactionSetsItsSettingsForItselfAlone: a batched
// transaction of which nothing went out before its COMMIT goes as one
// statement that sets what it needs for itself alone (SET STATEMENT … FOR,
// SET TRANSACTION), on a session whose own values differ from each. While
// it waits for a row another transaction holds, InnoDB reports it READ
// COMMITTED, not the session's SERIALIZABLE, and it commits once the row
// is free; with the row held, it gives up at its own one-second lock
// timeout, not the session's hour, rolls back, and the connection is
// kept. After either, the session has its own values, and no transaction.
func TestAWholeTransactionSetsItsSettingsForItselfAlone(t *testing.T) {
	t.Parallel()
	db := setup(t)
	c := conn(t, db)
	ctx := context.Background()
	if _, err := c.ExecContext(ctx, "SET SESSION innodb_lock_wait_timeout = 3600, SESSION max_statement_time = 0, SESSION tx_isolation = 'SERIALIZABLE'"); err != nil {
		t.Fatal(err)
	}
	own := readSession(t, c)
	var id int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	after := func(when string, want int) {
		t.Helper()
		var (
			v    int
			inTx bool
		)
		if err := c.QueryRowContext(ctx, "SELECT (SELECT v FROM t WHERE k = 1), @@in_transaction").Scan(&v, &inTx); err != nil {
			t.Fatalf("%s: %v", when, err)
		}
		if v != want || inTx {
			t.Fatalf("%s: v = %d, in a transaction %v; want %d and none", when, v, inTx, want)
		}
		if got := readSession(t, c); got != own {
			t.Fatalf("%s: the session has %+v, want its own %+v", when, got, own)
		}
	}

	holder := holdRow1(t, db)
	tx := storemysql.BeginBatch(c, time.Minute, 2*time.Minute)
	tx.Queue("UPDATE t SET v = v + 10 WHERE k = 1", nil, nil)
	done := make(chan error, 1)
	go func() { done <- tx.Finish(ctx) }()
	var level string
	deadline := time.Now().Add(time.Minute)
	for {
		// InnoDB refills the snapshot that information_schema.innodb_trx
		// reads only once nobody has read it for 100 ms (trx0i_s.cc,
		// CACHE_MIN_IDLE_TIME_NS): a poll faster than that would read its
		// first snapshot, taken before the wait, for ever.
		time.Sleep(250 * time.Millisecond)
		err := db.QueryRowContext(ctx, "SELECT trx_isolation_level FROM information_schema.innodb_trx "+
			"WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", id).Scan(&level)
		if err == nil {
			break
		}
		select {
		case err := <-done:
			t.Fatalf("the transaction ended (%v) before it was seen waiting for the row; %s", err, transactions(t, db))
		default:
		}
		if !errors.Is(err, sql.ErrNoRows) || time.Now().After(deadline) {
			t.Fatalf("waiting to see the transaction of connection %d wait for the row: %v; %s", id, err, transactions(t, db))
		}
	}
	holder.Abort(ctx)
	if err := <-done; err != nil {
		t.Fatalf("the transaction after the row was freed: %v", err)
	}
	if level != "READ COMMITTED" {
		t.Fatalf("the waiting transaction ran %s, want READ COMMITTED", level)
	}
	after("after the commit", 10)

	holder = holdRow1(t, db)
	defer holder.Abort(ctx)
	tx = storemysql.BeginBatch(c, time.Second, 2*time.Minute)
	tx.Queue("UPDATE t SET v = v + 100 WHERE k = 1", nil, nil)
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := tx.Finish(bounded); storemysql.KindOf(err) != storemysql.LockTimeout {
		t.Fatalf("with the row held: %v (kind %v), want its own lock timeout", err, storemysql.KindOf(err))
	}
	holder.Abort(ctx)
	var kept int64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&kept); err != nil || kept != id {
		t.Fatalf("connection %d (%v) after a lock timeout, want %d kept", kept, err, id)
	}
	after("after the lock timeout", 10)
}

// TestAWholeTransactionThatCannotBeginIsUnknown: on a session the
// application left in a transaction of its own, a whole transaction's SET
// TRANSACTION fails (1568) before its first write's mark: the failure is
// read as unknown, not as that write's (its wrap is not applied), and the
// connection is discarded, ending the application's transaction without
// a commit; the write never ran.
func TestAWholeTransactionThatCannotBeginIsUnknown(t *testing.T) {
	t.Parallel()
	db := setup(t)
	c := conn(t, db)
	ctx := context.Background()
	for _, q := range []string{"START TRANSACTION", "UPDATE t SET v = 5 WHERE k = 20"} {
		if _, err := c.ExecContext(ctx, q); err != nil {
			t.Fatal(err)
		}
	}
	tag := errors.New("the write")
	tx := storemysql.BeginBatch(c, time.Second, time.Minute)
	tx.Queue("UPDATE t SET v = 7 WHERE k = 1", nil, func(err error) error { return errors.Join(tag, err) })
	err := tx.Finish(ctx)
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1568 || errors.Is(err, tag) {
		t.Fatalf("Finish = %v, want the server's 1568 read as unknown, without the write's wrap", err)
	}
	wantDiscarded(t, c)
	var v1, v20 int
	if err := db.QueryRowContext(ctx, "SELECT (SELECT v FROM t WHERE k = 1), (SELECT v FROM t WHERE k = 20)").Scan(&v1, &v20); err != nil {
		t.Fatal(err)
	}
	if v1 != 0 || v20 != 0 {
		t.Fatalf("v = %d (k 1) and %d (k 20), want 0 and 0: the write ran, or the application's transaction committed", v1, v20)
	}
}

// TestAWholeTransactionIsBoundedByItsStatementTimeout: a whole
// transaction waiting for a row another transaction holds, on a session
// whose own statement time is unbounded and under a lock timeout of an
// hour, is ended by its own statement timeout (error 1969, read as
// unavailable: what ran is unknown), its connection discarded, and
// nothing of it commits.
func TestAWholeTransactionIsBoundedByItsStatementTimeout(t *testing.T) {
	t.Parallel()
	db := setup(t)
	c := conn(t, db)
	ctx := context.Background()
	if _, err := c.ExecContext(ctx, "SET SESSION max_statement_time = 0"); err != nil {
		t.Fatal(err)
	}
	holder := holdRow1(t, db)
	defer holder.Abort(ctx)
	tx := storemysql.BeginBatch(c, time.Hour, 200*time.Millisecond)
	tx.Queue("UPDATE t SET v = v + 10 WHERE k = 20", nil, nil)
	tx.Queue("UPDATE t SET v = v + 10 WHERE k = 1", nil, nil)
	bounded, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	err := tx.Finish(bounded)
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1969 || storemysql.KindOf(err) != storemysql.Unavailable {
		t.Fatalf("Finish with the row held = %v, want its own statement timeout (1969), unavailable", err)
	}
	holder.Abort(ctx)
	wantDiscarded(t, c)
	var sum int
	if err := db.QueryRowContext(ctx, "SELECT SUM(v) FROM t").Scan(&sum); err != nil || sum != 0 {
		t.Fatalf("sum of v = %d (%v), want 0: a write of the timed-out transaction committed", sum, err)
	}
}

// wantDiscarded fails the test unless c was discarded, as it must be
// after an outcome the driver cannot know.
func wantDiscarded(t *testing.T, c *sql.Conn) {
	t.Helper()
	var one int
	if err := c.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err == nil {
		t.Fatal("the connection was kept after an unknown outcome")
	}
}

// transactions describes InnoDB's transactions and the server's sessions,
// for a failure's message.
func transactions(t *testing.T, db *sql.DB) string {
	t.Helper()
	var b strings.Builder
	for _, q := range []string{
		"SELECT CONCAT_WS(' ', trx_mysql_thread_id, trx_state, trx_isolation_level, IFNULL(trx_query, '-')) FROM information_schema.innodb_trx",
		"SELECT CONCAT_WS(' ', id, IFNULL(db, '-'), command, IFNULL(state, '-'), IFNULL(LEFT(info, 200), '-')) FROM information_schema.processlist",
	} {
		rows, err := db.QueryContext(context.Background(), q)
		if err != nil {
			fmt.Fprintf(&b, "%s: %v\n", q, err)
			continue
		}
		for rows.Next() {
			var line string
			if err := rows.Scan(&line); err == nil {
				b.WriteString(line + "\n")
			}
		}
		_ = rows.Close()
	}
	return b.String()
}
