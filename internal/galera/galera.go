package galera

import (
	"context"
	"database/sql"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/internal/pgtemp"
	"github.com/retrysafe/retrysafe/internal/procgroup"
)

// Nodes is the size of the cluster [Start] creates.
const Nodes = 3

// Config tunes [Start].
type Config struct {
	// Database is created on the cluster (utf8mb4, utf8mb4_nopad_bin, as
	// the framework's migrations expect) for the application. Defaults to
	// "retrysafe".
	Database string
}

// Cluster is three MariaDB Galera nodes owned by one test. Nodes are
// numbered 0, 1, 2.
type Cluster struct {
	tb       testing.TB
	root     string
	mariadbd string
	provider string
	cred     *syscall.Credential // run as the mysql user (under root)
	database string
	nodes    []*node
	// started is how long Start took.
	started time.Duration
}

// node is one mariadbd.
type node struct {
	index                     int
	name, dir, conf           string
	port, gcomm, ist, sstPort int

	procgroup.Process

	mu sync.Mutex
	// isolated is set between Partition and Heal.
	isolated bool
	// paused holds the FLUSH TABLES WITH READ LOCK of PauseApply.
	paused   *sql.Conn
	pausedDB *sql.DB
}

// Start creates the cluster and returns once its three nodes are Synced
// in one primary component of three; everything is killed and removed when
// the test ends. The test is skipped (failed when CI is set) when
// MariaDB's server, Galera or rsync is not installed.
func Start(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	began := time.Now()
	if cfg.Database == "" {
		cfg.Database = "retrysafe"
	}
	mariadbd, provider, msg := binaries()
	if msg != "" {
		missing(tb, "galera: "+msg+" (apt-get install mariadb-server galera-4 rsync)")
	}
	root, err := os.MkdirTemp("", "galera-")
	if err != nil {
		tb.Fatalf("galera: %v", err)
	}
	c := &Cluster{tb: tb, root: root, mariadbd: mariadbd, provider: provider, database: cfg.Database}
	tb.Cleanup(func() {
		for _, n := range c.nodes {
			n.mu.Lock()
			if n.paused != nil {
				_ = n.paused.Close()
				_ = n.pausedDB.Close()
				n.paused, n.pausedDB = nil, nil
			}
			n.mu.Unlock()
			n.Kill()
		}
		_ = os.RemoveAll(root)
	})
	if os.Geteuid() == 0 {
		cred, err := procgroup.Credential("mysql")
		if err != nil {
			missing(tb, "galera: running as root and there is no mysql user for mariadbd")
		}
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatalf("galera: %v", err)
		}
		c.cred = cred
	}
	ports := map[int]bool{}
	for i := range Nodes {
		n := &node{index: i, name: fmt.Sprintf("node%d", i+1), port: freePort(tb, ports), gcomm: freePort(tb, ports),
			ist: freePort(tb, ports), sstPort: freePort(tb, ports)}
		n.dir = filepath.Join(root, n.name)
		n.conf = filepath.Join(root, n.name+".cnf")
		c.nodes = append(c.nodes, n)
	}
	for _, n := range c.nodes {
		c.writeConf(n)
	}
	// The first node gets a fresh system schema, bootstraps a cluster
	// alone and stops cleanly, so that its data directory holds the
	// cluster's state ID and position (grastate.dat and InnoDB's header).
	// The others start from copies of it: they join by an incremental
	// state transfer of the few write sets since, where an empty node
	// would need a full one (rsync of every file, seconds each).
	first := c.nodes[0]
	c.mkdir(first.dir)
	c.run("mariadb-install-db", "--defaults-file="+first.conf, "--auth-root-authentication-method=normal",
		"--skip-test-db", "--wsrep-on=OFF")
	c.start(first, "--wsrep-new-cluster")
	c.waitFor("node1 to bootstrap the cluster", func() (bool, error) { return c.synced(first, 1) })
	c.stop(first)
	for _, n := range c.nodes[1:] {
		c.run("cp", "-a", first.dir, n.dir)
	}
	c.start(first, "--wsrep-new-cluster")
	c.waitFor("node1 to bootstrap the cluster", func() (bool, error) { return c.synced(first, 1) })
	// One at a time: two nodes joining at once churn the group's
	// membership for seconds.
	for i, n := range c.nodes[1:] {
		c.start(n)
		c.waitFor(n.name+" to join", func() (bool, error) { return c.synced(n, i+2) })
	}
	c.WaitSynced()
	c.CreateDatabase(cfg.Database)
	c.started = time.Since(began)
	tb.Logf("galera: 3 nodes synced in %s (ports %d, %d, %d)", c.started.Round(time.Millisecond),
		c.nodes[0].port, c.nodes[1].port, c.nodes[2].port)
	return c
}

// StartTime is how long [Start] took, from its call to three Synced nodes
// and the database created.
func (c *Cluster) StartTime() time.Duration { return c.started }

// missing skips the test, or fails it when CI is set: CI installs the
// packages, so there a missing one is a broken setup, not a skip.
func missing(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// binaries finds mariadbd and the Galera provider and checks that the
// state transfer's tools are installed; msg says what is missing.
func binaries() (mariadbd, provider, msg string) {
	for _, p := range []string{"/usr/sbin/mariadbd", "/usr/libexec/mariadbd"} {
		if _, err := os.Stat(p); err == nil {
			mariadbd = p
			break
		}
	}
	if mariadbd == "" {
		if p, err := exec.LookPath("mariadbd"); err == nil {
			mariadbd = p
		}
	}
	for _, p := range []string{"/usr/lib/galera/libgalera_smm.so", "/usr/lib/galera-4/libgalera_smm.so",
		"/usr/lib64/galera-4/libgalera_smm.so", "/usr/lib/libgalera_smm.so"} {
		if _, err := os.Stat(p); err == nil {
			provider = p
			break
		}
	}
	var lacks []string
	if mariadbd == "" {
		lacks = append(lacks, "mariadbd")
	}
	if provider == "" {
		lacks = append(lacks, "libgalera_smm.so")
	}
	for _, tool := range []string{"mariadb-install-db", "wsrep_sst_rsync", "rsync"} {
		if _, err := exec.LookPath(tool); err != nil {
			lacks = append(lacks, tool)
		}
	}
	if len(lacks) > 0 {
		msg = "not installed: " + strings.Join(lacks, ", ")
	}
	return mariadbd, provider, msg
}

func (c *Cluster) mkdir(dir string) {
	c.tb.Helper()
	if err := os.Mkdir(dir, 0o700); err != nil {
		c.tb.Fatalf("galera: %v", err)
	}
	if c.cred != nil {
		if err := os.Chown(dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			c.tb.Fatalf("galera: %v", err)
		}
	}
}

// writeConf writes n's option file, the only one mariadbd and the state
// transfer scripts read (--defaults-file).
func (c *Cluster) writeConf(n *node) {
	c.tb.Helper()
	members := make([]string, len(c.nodes))
	for i, m := range c.nodes {
		members[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(m.gcomm))
	}
	provider := strings.Join([]string{
		"gmcast.listen_addr=tcp://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.gcomm)),
		"ist.recv_addr=" + net.JoinHostPort("127.0.0.1", strconv.Itoa(n.ist)),
		// A small write-set cache, enough for a killed node's IST.
		"gcache.size=64M",
		// A lost node is noticed within seconds, not the default
		// 5 s + 15 s; still well above a loaded machine's pauses.
		"evs.suspect_timeout=PT3S", "evs.inactive_timeout=PT6S", "evs.install_timeout=PT6S",
		// A joining node is taken into the group within a second or
		// two instead of three or four.
		"evs.join_retrans_period=PT0.2S", "pc.announce_timeout=PT0.5S",
	}, ";")
	conf := fmt.Sprintf(`[mariadbd]
datadir=%[1]s
socket=%[1]s/mariadbd.sock
pid-file=%[1]s/mariadbd.pid
port=%[2]d
bind-address=127.0.0.1
skip-name-resolve
character-set-server=utf8mb4
collation-server=utf8mb4_nopad_bin
# small and not durable against a power loss: a test's cluster
innodb_buffer_pool_size=32M
innodb_log_file_size=16M
innodb_flush_log_at_trx_commit=2
innodb_doublewrite=0
sync_binlog=0
max_connections=300
# what Galera requires
binlog_format=ROW
default_storage_engine=InnoDB
innodb_autoinc_lock_mode=2
wsrep_on=ON
wsrep_provider=%[3]s
wsrep_cluster_name=retrysafe-test
wsrep_cluster_address=gcomm://%[4]s
wsrep_node_name=%[5]s
wsrep_node_address=%[6]s
wsrep_node_incoming_address=%[7]s
wsrep_sst_method=rsync
wsrep_sst_receive_address=%[8]s
wsrep_provider_options="%[9]s"
`, n.dir, n.port, c.provider, strings.Join(members, ","), n.name,
		net.JoinHostPort("127.0.0.1", strconv.Itoa(n.gcomm)), net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port)),
		net.JoinHostPort("127.0.0.1", strconv.Itoa(n.sstPort)), provider)
	if err := os.WriteFile(n.conf, []byte(conf), 0o644); err != nil {
		c.tb.Fatalf("galera: %v", err)
	}
}

func (c *Cluster) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command(name, args...)
	cmd.Dir = c.root
	cmd.Env = append(os.Environ(), "HOME="+c.root, "TMPDIR="+c.root)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: c.cred}
	return cmd
}

// run runs one command to its end.
func (c *Cluster) run(name string, args ...string) {
	c.tb.Helper()
	if out, err := c.command(name, args...).CombinedOutput(); err != nil {
		c.tb.Fatalf("galera: %s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// start runs mariadbd for n in a process group of its own (with the
// state transfer scripts it spawns), its output appended to ROOT/NAME.log.
func (c *Cluster) start(n *node, args ...string) {
	c.tb.Helper()
	log, err := os.OpenFile(filepath.Join(c.root, n.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		c.tb.Fatalf("galera: %v", err)
	}
	defer log.Close()
	cmd := c.command(c.mariadbd, append([]string{"--defaults-file=" + n.conf}, args...)...)
	cmd.Stdout, cmd.Stderr = log, log
	n.mu.Lock()
	n.isolated = false
	n.mu.Unlock()
	if err := n.Start(cmd); err != nil {
		c.tb.Fatalf("galera: start %s: %v", n.name, err)
	}
}

// stop stops mariadbd of n cleanly (SIGTERM) and waits until it exited.
func (c *Cluster) stop(n *node) {
	c.tb.Helper()
	if err := n.Signal(syscall.SIGTERM); err != nil {
		c.tb.Fatalf("galera: stop %s: %v", n.name, err)
	}
	if !n.Stopped(time.Minute) {
		c.tb.Fatalf("galera: %s did not stop\n%s", n.name, c.Log())
	}
}

// freePort returns a TCP port of 127.0.0.1 that was free a moment ago,
// below the kernel's range of ephemeral ports where it can: a client
// that connects again and again to a port nobody listens on (a node
// restarting; a node's group communication reconnecting to a killed
// one) can be given that very port as its own and connect to itself
// (TCP simultaneous open), and the node then cannot listen on its port.
func freePort(tb testing.TB, taken map[int]bool) int {
	tb.Helper()
	low := 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				low = n
			}
		}
	}
	const floor = 10000
	for range 200 {
		if low-floor < 1000 {
			break
		}
		p := floor + rand.IntN(low-floor)
		if taken[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		_ = ln.Close()
		taken[p] = true
		return p
	}
	for {
		if p := pgtemp.FreePort(tb); !taken[p] {
			taken[p] = true
			return p
		}
	}
}

func (c *Cluster) node(i int) *node {
	c.tb.Helper()
	if i < 0 || i >= len(c.nodes) {
		c.tb.Fatalf("galera: no node %d (nodes are 0 to %d)", i, len(c.nodes)-1)
	}
	return c.nodes[i]
}

// Port is node i's SQL port on 127.0.0.1.
func (c *Cluster) Port(i int) int { return c.node(i).port }

// URL is the mysql:// URL of database db on node i, as user root (no
// password).
func (c *Cluster) URL(i int, db string) string {
	return fmt.Sprintf("mysql://root@%s/%s", net.JoinHostPort("127.0.0.1", strconv.Itoa(c.node(i).port)), db)
}

// DSN is the mysql:// URL of the application's database ([Config]) on
// node i.
func (c *Cluster) DSN(i int) string { return c.URL(i, c.database) }

// CreateDatabase creates database name (utf8mb4, utf8mb4_nopad_bin) on
// the cluster: DDL is replicated in total order, so every synced node has
// it once this returns.
func (c *Cluster) CreateDatabase(name string) {
	c.tb.Helper()
	c.Exec(c.first(), "CREATE DATABASE "+name+" CHARACTER SET utf8mb4 COLLATE utf8mb4_nopad_bin")
}

// first is the first running node that is not partitioned.
func (c *Cluster) first() int {
	for _, n := range c.nodes {
		n.mu.Lock()
		ok := n.Running() && !n.isolated
		n.mu.Unlock()
		if ok {
			return n.index
		}
	}
	c.tb.Fatal("galera: no node is running")
	return -1
}

// Log returns what every node wrote (mariadbd's log and its state
// transfers'), for a failing test to print.
func (c *Cluster) Log() string {
	var b strings.Builder
	for _, n := range c.nodes {
		out, _ := os.ReadFile(filepath.Join(c.root, n.name+".log"))
		fmt.Fprintf(&b, "--- %s\n%s", n.name, out)
	}
	return b.String()
}

// open opens a pool on node i's server (no database) that gives up
// connecting within 5 s.
func (c *Cluster) open(i int) (*sql.DB, error) {
	return storemysql.OpenDB(c.URL(i, ""), 5*time.Second)
}

// Exec runs statement q on node i, failing the test on an error.
func (c *Cluster) Exec(i int, q string) {
	c.tb.Helper()
	db, err := c.open(i)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		_, err = db.ExecContext(ctx, q)
		cancel()
		_ = db.Close()
	}
	if err != nil {
		c.tb.Fatalf("galera: %s on node %d: %v", q, i, err)
	}
}

// Status is what a node says of itself (SHOW GLOBAL STATUS LIKE 'wsrep_%').
type Status struct {
	// State is wsrep_local_state_comment: Synced, Donor/Desynced,
	// Joining, Joined, Initialized (outside a primary component).
	State string
	// Ready is wsrep_ready: the node takes queries.
	Ready bool
	// ClusterStatus is wsrep_cluster_status: Primary or non-Primary.
	ClusterStatus string
	// ClusterSize is wsrep_cluster_size: the nodes of its component.
	ClusterSize int
	// LastCommitted is wsrep_last_committed: the seqno of the last write
	// set it applied or committed.
	LastCommitted int64
}

// NodeStatus reads node i's status; an error is a node that does not
// answer.
func (c *Cluster) NodeStatus(i int) (Status, error) {
	db, err := c.open(i)
	if err != nil {
		return Status{}, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	rows, err := db.QueryContext(ctx, `SELECT VARIABLE_NAME, VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS
WHERE VARIABLE_NAME IN ('WSREP_LOCAL_STATE_COMMENT', 'WSREP_READY', 'WSREP_CLUSTER_STATUS', 'WSREP_CLUSTER_SIZE', 'WSREP_LAST_COMMITTED')`)
	if err != nil {
		return Status{}, err
	}
	defer rows.Close()
	var s Status
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return Status{}, err
		}
		switch strings.ToUpper(name) {
		case "WSREP_LOCAL_STATE_COMMENT":
			s.State = value
		case "WSREP_READY":
			s.Ready = value == "ON"
		case "WSREP_CLUSTER_STATUS":
			s.ClusterStatus = value
		case "WSREP_CLUSTER_SIZE":
			s.ClusterSize, _ = strconv.Atoi(value)
		case "WSREP_LAST_COMMITTED":
			s.LastCommitted, _ = strconv.ParseInt(value, 10, 64)
		}
	}
	return s, rows.Err()
}

// synced reports whether n is Synced and ready in a primary component of
// size nodes.
func (c *Cluster) synced(n *node, size int) (bool, error) {
	s, err := c.NodeStatus(n.index)
	if err != nil {
		return false, err
	}
	ok := s.State == "Synced" && s.Ready && s.ClusterStatus == "Primary" && s.ClusterSize == size
	return ok, fmt.Errorf("%s: %+v", n.name, s)
}

// waitFor polls cond until it holds; the nodes change state on their
// own, so a helper can only look.
func (c *Cluster) waitFor(what string, cond func() (bool, error)) {
	c.tb.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			c.tb.Fatalf("galera: waited 3m for %s (last: %v)\n%s", what, err, c.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// members are the running nodes that are not partitioned.
func (c *Cluster) members() []*node {
	var out []*node
	for _, n := range c.nodes {
		n.mu.Lock()
		if n.Running() && !n.isolated {
			out = append(out, n)
		}
		n.mu.Unlock()
	}
	return out
}

// WaitSynced waits until every running node that is not partitioned is
// Synced, ready, and in one primary component made of exactly those
// nodes. A node paused by [Cluster.PauseApply] is desynced: resume it
// first.
func (c *Cluster) WaitSynced() {
	c.tb.Helper()
	members := c.members()
	c.waitFor(fmt.Sprintf("%d nodes synced", len(members)), func() (bool, error) {
		for _, n := range members {
			if ok, err := c.synced(n, len(members)); !ok {
				return false, err
			}
		}
		return true, nil
	})
}

// CatchUp returns once every running node that is not partitioned has
// applied every write set that any of them had committed when it was
// called (wsrep_last_committed), so that a plain read on any node sees
// every commit before the call.
func (c *Cluster) CatchUp() {
	c.tb.Helper()
	members := c.members()
	var target int64
	for _, n := range members {
		s, err := c.NodeStatus(n.index)
		if err != nil {
			c.tb.Fatalf("galera: status of %s: %v", n.name, err)
		}
		target = max(target, s.LastCommitted)
	}
	c.waitFor(fmt.Sprintf("every node to apply seqno %d", target), func() (bool, error) {
		for _, n := range members {
			s, err := c.NodeStatus(n.index)
			if err != nil || s.LastCommitted < target {
				return false, fmt.Errorf("%s: %+v %v", n.name, s, err)
			}
		}
		return true, nil
	})
}

// Kill sends SIGKILL to node i, as when its machine is lost, and returns
// once its process is gone. The other nodes notice within seconds
// (evs.suspect_timeout, 3 s) and go on as a primary component of two
// while they are a majority; [Cluster.WaitSynced] waits for that, and
// [Cluster.Restart] brings the node back.
func (c *Cluster) Kill(i int) {
	c.tb.Helper()
	if !c.node(i).Kill() {
		c.tb.Fatalf("galera: node %d is not running", i)
	}
}

// Restart starts node i again after [Cluster.Kill] (on its own data: it
// catches up by an incremental state transfer, IST, from another node's
// write-set cache, or by a full one, SST, when the cache no longer has what
// it missed) and returns once every running node is Synced in one primary
// component, that node included. The other nodes must form a primary
// component: a cluster that lost every node needs a new bootstrap, which
// this does not do.
func (c *Cluster) Restart(i int) {
	c.tb.Helper()
	n := c.node(i)
	if n.Running() {
		c.tb.Fatalf("galera: node %d is running", i)
	}
	c.start(n)
	c.WaitSynced()
}

// Reseed kills node i, removes its data directory and starts it empty: it
// rejoins by a full state transfer (rsync, from a donor that blocks its
// own commits while the files are copied). It returns once every running
// node is Synced.
func (c *Cluster) Reseed(i int) {
	c.tb.Helper()
	n := c.node(i)
	n.Kill()
	if err := os.RemoveAll(n.dir); err != nil {
		c.tb.Fatalf("galera: %v", err)
	}
	c.mkdir(n.dir)
	c.start(n)
	c.WaitSynced()
}

// Drain makes node i refuse its clients' queries, as an operator does
// before maintenance (SET GLOBAL wsrep_reject_queries = ALL): every
// statement that reads or writes a table fails with error 1047 (ER_UNKNOWN_COM_ERROR,
// "WSREP has not yet prepared node for application use"), on open
// connections too; a statement without a table (SELECT 1, a ping) still
// succeeds. The node stays Synced and keeps applying the cluster's writes.
func (c *Cluster) Drain(i int) {
	c.tb.Helper()
	c.Exec(i, "SET GLOBAL wsrep_reject_queries = ALL")
}

// Undrain takes node i's clients' queries again (wsrep_reject_queries =
// NONE).
func (c *Cluster) Undrain(i int) {
	c.tb.Helper()
	c.Exec(i, "SET GLOBAL wsrep_reject_queries = NONE")
}

// Partition cuts node i off the others' group communication
// (wsrep_provider_options gmcast.isolate=1, the provider's own partition
// switch): it is left alone in a non-primary component, where it answers
// every statement that reads or writes a table with error 1047 and says
// wsrep_ready=OFF, while the two others go on as the primary component.
// It returns once both sides say so; [Cluster.Heal] ends the partition.
func (c *Cluster) Partition(i int) {
	c.tb.Helper()
	n := c.node(i)
	c.Exec(i, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=1'")
	n.mu.Lock()
	n.isolated = true
	n.mu.Unlock()
	c.waitFor(n.name+" to be non-primary", func() (bool, error) {
		s, err := c.NodeStatus(i)
		return err == nil && s.ClusterStatus != "Primary" && !s.Ready, fmt.Errorf("%+v %v", s, err)
	})
	c.WaitSynced()
}

// Heal ends [Cluster.Partition] of node i and returns once it is Synced
// in the primary component again (it catches up by IST).
func (c *Cluster) Heal(i int) {
	c.tb.Helper()
	n := c.node(i)
	c.Exec(i, "SET GLOBAL wsrep_provider_options = 'gmcast.isolate=0'")
	n.mu.Lock()
	n.isolated = false
	n.mu.Unlock()
	c.WaitSynced()
}

// PauseApply makes node i stop applying the others' write sets while the
// cluster goes on without waiting for it: it holds FLUSH TABLES WITH READ
// LOCK there, which desyncs the node (wsrep_local_state_comment
// Donor/Desynced) and pauses its provider. Until [Cluster.ResumeApply] a
// plain read on node i sees the cluster as it was at the pause, a read
// that waits for causality (wsrep_sync_wait) waits, and so does a write.
// It is a replica that lags by every commit after it, on demand.
func (c *Cluster) PauseApply(i int) {
	c.tb.Helper()
	n := c.node(i)
	db, err := c.open(i)
	if err != nil {
		c.tb.Fatalf("galera: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	conn, err := db.Conn(ctx)
	if err == nil {
		_, err = conn.ExecContext(ctx, "FLUSH TABLES WITH READ LOCK")
	}
	if err != nil {
		_ = db.Close()
		c.tb.Fatalf("galera: pause node %d: %v", i, err)
	}
	n.mu.Lock()
	n.paused, n.pausedDB = conn, db
	n.mu.Unlock()
	c.waitFor(n.name+" to desync", func() (bool, error) {
		s, err := c.NodeStatus(i)
		return err == nil && s.State != "Synced", fmt.Errorf("%+v %v", s, err)
	})
}

// ResumeApply ends [Cluster.PauseApply] of node i and returns once it has
// caught up and is Synced again. On a node that is not paused it does
// nothing, so that a test may defer it.
func (c *Cluster) ResumeApply(i int) {
	c.tb.Helper()
	n := c.node(i)
	n.mu.Lock()
	conn, db := n.paused, n.pausedDB
	n.paused, n.pausedDB = nil, nil
	n.mu.Unlock()
	if conn == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := conn.ExecContext(ctx, "UNLOCK TABLES")
	_ = conn.Close()
	_ = db.Close()
	if err != nil {
		c.tb.Fatalf("galera: resume node %d: %v", i, err)
	}
	c.WaitSynced()
}
