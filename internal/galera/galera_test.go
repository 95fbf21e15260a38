package galera_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"

	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/internal/galera"
)

// erUnknownCom is ER_UNKNOWN_COM_ERROR, what a node that cannot serve
// answers: "WSREP has not yet prepared node for application use".
const erUnknownCom = 1047

func open(t *testing.T, dsn string) *sql.DB {
	t.Helper()
	db, err := storemysql.OpenDB(dsn, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// errNumber is the server's error number of err, or 0.
func errNumber(err error) uint16 {
	var my *mysql.MySQLError
	if errors.As(err, &my) {
		return my.Number
	}
	return 0
}

// refused reports a connection the node's port refused (not listening).
func refused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

func count(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	if err := db.QueryRow("SELECT count(*) FROM t").Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// TestCluster: a row written on one node is read on another with
// wsrep_sync_wait; a killed node rejoins and catches up (IST), answering
// nothing but a refused connection or 1047 meanwhile; a drained node
// refuses queries with 1047; a partitioned node is non-primary, says
// wsrep_ready=OFF and refuses queries with 1047; a paused node reads the
// past until it resumes; an emptied node rejoins by SST, while its donor
// delays writes and refuses none.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := galera.Start(t, galera.Config{})
	ctx := context.Background()
	dbs := make([]*sql.DB, galera.Nodes)
	for i := range dbs {
		dbs[i] = open(t, c.DSN(i))
	}
	if _, err := dbs[0].Exec("CREATE TABLE t (id int PRIMARY KEY, v int NOT NULL)"); err != nil {
		t.Fatal(err)
	}

	if !t.Run("causal read on another node", func(t *testing.T) {
		if _, err := dbs[0].Exec("INSERT INTO t VALUES (1, 1)"); err != nil {
			t.Fatal(err)
		}
		var v int
		if err := dbs[1].QueryRow("SET STATEMENT wsrep_sync_wait = 1 FOR SELECT v FROM t WHERE id = 1").Scan(&v); err != nil {
			t.Fatalf("node 2 does not have the row node 1 committed: %v", err)
		}
	}) {
		return
	}

	if !t.Run("killed node rejoins", func(t *testing.T) {
		c.Kill(2)
		c.WaitSynced() // nodes 1 and 2 as a primary component of two
		for id := 2; id <= 11; id++ {
			if _, err := dbs[0].Exec("INSERT INTO t VALUES (?, 1)", id); err != nil {
				t.Fatal(err)
			}
		}
		// While it rejoins, node 3 refuses connections, then answers 1047
		// until it is synced: nothing else.
		var (
			mu     sync.Mutex
			seen   = map[string]int{}
			stop   = make(chan struct{})
			polled = make(chan struct{})
		)
		go func() {
			defer close(polled)
			for {
				select {
				case <-stop:
					return
				default:
				}
				qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				var n int
				err := dbs[2].QueryRowContext(qctx, "SELECT count(*) FROM t").Scan(&n)
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					seen["answered"]++
				case refused(err):
					seen["refused"]++
				case errNumber(err) == erUnknownCom:
					seen["1047"]++
				default:
					seen[err.Error()]++
				}
				mu.Unlock()
				time.Sleep(10 * time.Millisecond)
			}
		}()
		c.Restart(2)
		close(stop)
		<-polled
		t.Logf("node 3's answers while it rejoined: %v", seen)
		for what := range seen {
			if what != "answered" && what != "refused" && what != "1047" {
				t.Errorf("a rejoining node answered %q", what)
			}
		}
		c.CatchUp()
		if n := count(t, dbs[2]); n != 11 {
			t.Fatalf("node 3 after its restart has %d rows, want 11", n)
		}
	}) {
		return
	}

	if !t.Run("drained node refuses queries with 1047", func(t *testing.T) {
		c.Drain(1)
		var n int
		err := dbs[1].QueryRow("SELECT count(*) FROM t").Scan(&n)
		if errNumber(err) != erUnknownCom {
			t.Fatalf("a read on a drained node: %v, want error %d", err, erUnknownCom)
		}
		_, err = dbs[1].Exec("INSERT INTO t VALUES (100, 1)")
		if errNumber(err) != erUnknownCom {
			t.Fatalf("a write on a drained node: %v, want error %d", err, erUnknownCom)
		}
		// What a health check usually runs still succeeds.
		if err := dbs[1].Ping(); err != nil {
			t.Fatalf("ping of a drained node: %v", err)
		}
		var one int
		if err := dbs[1].QueryRow("SELECT 1").Scan(&one); err != nil {
			t.Fatalf("SELECT 1 on a drained node: %v", err)
		}
		if s, err := c.NodeStatus(1); err != nil || s.State != "Synced" || !s.Ready {
			t.Fatalf("a drained node's status: %+v %v, want Synced and ready", s, err)
		}
		c.Undrain(1)
		_ = count(t, dbs[1])
	}) {
		return
	}

	if !t.Run("partitioned node is non-primary", func(t *testing.T) {
		c.Partition(2)
		s, err := c.NodeStatus(2)
		if err != nil || s.Ready || s.ClusterStatus == "Primary" {
			t.Fatalf("a partitioned node's status: %+v %v, want non-Primary and not ready", s, err)
		}
		var n int
		err = dbs[2].QueryRow("SELECT count(*) FROM t").Scan(&n)
		if errNumber(err) != erUnknownCom {
			t.Fatalf("a read on a non-primary node: %v, want error %d", err, erUnknownCom)
		}
		if err := dbs[2].Ping(); err != nil {
			t.Fatalf("ping of a non-primary node: %v", err)
		}
		// The majority goes on.
		if _, err := dbs[0].Exec("INSERT INTO t VALUES (12, 1)"); err != nil {
			t.Fatalf("a write on the primary component: %v", err)
		}
		c.Heal(2)
		c.CatchUp()
		if n := count(t, dbs[2]); n != 12 {
			t.Fatalf("node 3 after the partition has %d rows, want 12", n)
		}
	}) {
		return
	}

	if !t.Run("paused node reads the past", func(t *testing.T) {
		c.PauseApply(1)
		if _, err := dbs[0].Exec("INSERT INTO t VALUES (13, 1)"); err != nil {
			t.Fatal(err)
		}
		if n := count(t, dbs[1]); n != 12 {
			t.Fatalf("a paused node reads %d rows, want the 12 before its pause", n)
		}
		c.ResumeApply(1)
		c.CatchUp()
		if n := count(t, dbs[1]); n != 13 {
			t.Fatalf("a resumed node reads %d rows, want 13", n)
		}
	}) {
		return
	}

	t.Run("emptied node rejoins by SST", func(t *testing.T) {
		// Meanwhile the donor (one of the two others) blocks its commits
		// while rsync copies its files, and refuses nothing: its writes
		// wait, they do not fail.
		c.Kill(0)
		c.WaitSynced()
		var (
			wg      sync.WaitGroup
			stop    = make(chan struct{})
			slowest [galera.Nodes]time.Duration
			failed  [galera.Nodes][]error
		)
		for node := 1; node < galera.Nodes; node++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for id := node * 1000; ; id++ {
					select {
					case <-stop:
						return
					default:
					}
					start := time.Now()
					_, err := dbs[node].ExecContext(ctx, "INSERT INTO t VALUES (?, 0)", id)
					slowest[node] = max(slowest[node], time.Since(start))
					if err != nil {
						failed[node] = append(failed[node], err)
					}
					time.Sleep(10 * time.Millisecond)
				}
			}()
		}
		c.Reseed(0)
		close(stop)
		wg.Wait()
		for node := 1; node < galera.Nodes; node++ {
			t.Logf("node %d's writes during node 1's SST: slowest %s, errors %v", node+1, slowest[node].Round(time.Millisecond), failed[node])
			if len(failed[node]) > 0 {
				t.Errorf("node %d refused writes during an SST: %v", node+1, failed[node])
			}
		}
		if _, err := dbs[1].Exec("DELETE FROM t WHERE v = 0"); err != nil {
			t.Fatal(err)
		}
		c.CatchUp()
		if n := count(t, dbs[0]); n != 13 {
			t.Fatalf("node 1 after its SST has %d rows, want 13", n)
		}
	})
}
