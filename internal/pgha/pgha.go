package pgha

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/retrysafe/retrysafe/framework/store/storepg" // and so database/sql driver "pgx"

	"github.com/retrysafe/retrysafe/internal/pgtemp"
	"github.com/retrysafe/retrysafe/internal/procgroup"
)

// Config tunes [Start].
type Config struct {
	// Database is created on the primary (and so on the standby) for the
	// application. Defaults to "retrysafe".
	Database string
}

// Node names one PostgreSQL node of the formation.
type Node struct {
	Name string
	Port int
}

// Formation is a monitor, a primary and a standby owned by one test.
type Formation struct {
	tb       testing.TB
	root     string
	bin      string // PostgreSQL server binaries (pg_ctl)
	autoctl  string
	cred     *syscall.Credential // run as the postgres user (under root)
	env      []string
	database string
	monitor  *process
	nodes    []*process // node1, node2
}

// process is one `pg_autoctl run`: the monitor or a node's keeper with its
// postmaster, all in one process group.
type process struct {
	name, pgdata string
	port         int
	procgroup.Process
}

// Start creates the formation and returns once the primary has a
// synchronous standby; everything is killed and removed when the test ends.
// The test is skipped (failed when CI is set) when pg_auto_failover is not
// installed.
func Start(tb testing.TB, cfg Config) *Formation {
	tb.Helper()
	if cfg.Database == "" {
		cfg.Database = "retrysafe"
	}
	autoctl, bin := binaries()
	if autoctl == "" || bin == "" {
		missing(tb, "pgha: pg_auto_failover is not installed (apt-get install postgresql-15-auto-failover)")
	}
	root, err := os.MkdirTemp("", "pgha-")
	if err != nil {
		tb.Fatalf("pgha: %v", err)
	}
	f := &Formation{tb: tb, root: root, bin: bin, autoctl: autoctl, database: cfg.Database}
	tb.Cleanup(func() {
		for _, p := range append([]*process{f.monitor}, f.nodes...) {
			if p != nil {
				p.Kill()
			}
		}
		_ = os.RemoveAll(root)
	})
	if os.Geteuid() == 0 {
		cred, err := procgroup.Credential("postgres")
		if err != nil {
			missing(tb, "pgha: running as root and there is no postgres user for pg_autoctl")
		}
		if err := os.Chown(root, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatalf("pgha: %v", err)
		}
		f.cred = cred
	}
	// pg_autoctl keeps its configuration, state and pid files under XDG
	// directories: inside root, so that nothing outlives the test. The
	// runtime directory must exist, or the pid files go to /tmp/pg_autoctl.
	if err := os.Mkdir(filepath.Join(root, "run"), 0o700); err != nil {
		tb.Fatalf("pgha: %v", err)
	}
	if f.cred != nil {
		if err := os.Chown(filepath.Join(root, "run"), int(f.cred.Uid), int(f.cred.Gid)); err != nil {
			tb.Fatalf("pgha: %v", err)
		}
	}
	f.env = append(os.Environ(), "HOME="+root, "XDG_CONFIG_HOME="+filepath.Join(root, "config"),
		"XDG_DATA_HOME="+filepath.Join(root, "share"), "XDG_RUNTIME_DIR="+filepath.Join(root, "run"),
		"PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "PGCONNECT_TIMEOUT=5")

	f.monitor = &process{name: "monitor", pgdata: filepath.Join(root, "monitor"), port: pgtemp.FreePort(tb)}
	f.run("create", "monitor", "--pgctl", filepath.Join(bin, "pg_ctl"), "--pgdata", f.monitor.pgdata,
		"--pgport", strconv.Itoa(f.monitor.port), "--hostname", "127.0.0.1", "--auth", "trust", "--no-ssl")
	f.appendConf(f.monitor.pgdata, map[string]string{
		"listen_addresses":                                 "'127.0.0.1'",
		"pgautofailover.health_check_period":               "1000",
		"pgautofailover.health_check_timeout":              "1000",
		"pgautofailover.health_check_max_retries":          "1",
		"pgautofailover.health_check_retry_delay":          "500",
		"pgautofailover.node_considered_unhealthy_timeout": "3000",
		"pgautofailover.primary_demote_timeout":            "3000",
		"fsync":                                            "off",
	})
	f.start(f.monitor)
	f.waitMonitor()

	for i := range 2 {
		n := &process{name: fmt.Sprintf("node%d", i+1), pgdata: filepath.Join(root, fmt.Sprintf("node%d", i+1)), port: pgtemp.FreePort(tb)}
		f.nodes = append(f.nodes, n)
		f.run("create", "postgres", "--pgctl", filepath.Join(bin, "pg_ctl"), "--pgdata", n.pgdata,
			"--pgport", strconv.Itoa(n.port), "--hostname", "127.0.0.1", "--listen", "127.0.0.1",
			"--auth", "trust", "--no-ssl", "--monitor", f.monitorURL("autoctl_node"),
			"--name", n.name, "--dbname", cfg.Database, "--replication-quorum", "true")
		if i == 0 {
			// The standby copies these with its base backup.
			// pg_auto_failover sizes shared_buffers for a dedicated
			// machine (a quarter of its memory): too much for a test.
			// A demoted primary that pg_rewind cannot rewind (after
			// SIGKILL it needs crash recovery, which pg_rewind's
			// single-user run refuses beside pg_autoctl's
			// standby.signal) is rebuilt with pg_basebackup, which
			// waits for a spread checkpoint: paced to
			// checkpoint_completion_target × checkpoint_timeout, up to
			// 4.5 minutes by default with the buffers a load leaves
			// dirty. Unpaced, it takes what writing them takes (fsync
			// is off).
			f.appendConf(n.pgdata, map[string]string{
				"shared_buffers":               "'64MB'",
				"fsync":                        "off",
				"max_connections":              "200",
				"checkpoint_completion_target": "0",
			})
		}
		f.start(n)
		if i == 0 {
			f.waitStates("single")
		}
	}
	f.WaitReplicated()
	return f
}

// missing skips the test, or fails it when CI is set: CI installs the
// packages, so there a missing one is a broken setup, not a skip.
func missing(tb testing.TB, msg string) {
	tb.Helper()
	if os.Getenv("CI") != "" {
		tb.Fatal(msg)
	}
	tb.Skip(msg)
}

// binaries finds pg_autoctl and the server binaries of the PostgreSQL
// version whose pgautofailover extension is installed.
func binaries() (autoctl, bin string) {
	controls, _ := filepath.Glob("/usr/share/postgresql/*/extension/pgautofailover.control")
	for _, c := range controls {
		version := filepath.Base(filepath.Dir(filepath.Dir(c)))
		dir := filepath.Join("/usr/lib/postgresql", version, "bin")
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			bin = dir
			if _, err := os.Stat(filepath.Join(dir, "pg_autoctl")); err == nil {
				autoctl = filepath.Join(dir, "pg_autoctl")
			}
		}
	}
	if p, err := exec.LookPath("pg_autoctl"); err == nil && autoctl == "" {
		autoctl = p
	}
	return autoctl, bin
}

func (f *Formation) command(args ...string) *exec.Cmd {
	cmd := exec.Command(f.autoctl, args...)
	cmd.Env = f.env
	cmd.Dir = f.root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Credential: f.cred}
	return cmd
}

// run runs one pg_autoctl command to its end.
func (f *Formation) run(args ...string) {
	f.tb.Helper()
	if out, err := f.command(args...).CombinedOutput(); err != nil {
		f.tb.Fatalf("pgha: pg_autoctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// appendConf adds settings to postgresql.auto.conf, read after the files
// pg_autoctl writes.
func (f *Formation) appendConf(pgdata string, settings map[string]string) {
	f.tb.Helper()
	var b strings.Builder
	for k, v := range settings {
		fmt.Fprintf(&b, "%s = %s\n", k, v)
	}
	file, err := os.OpenFile(filepath.Join(pgdata, "postgresql.auto.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err == nil {
		_, err = file.WriteString(b.String())
		if cerr := file.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		f.tb.Fatalf("pgha: %v", err)
	}
}

// start runs `pg_autoctl run` for p in a process group of its own, its
// output appended to ROOT/NAME.log.
func (f *Formation) start(p *process) {
	f.tb.Helper()
	log, err := os.OpenFile(filepath.Join(f.root, p.name+".log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		f.tb.Fatalf("pgha: %v", err)
	}
	defer log.Close()
	cmd := f.command("run", "--pgdata", p.pgdata)
	cmd.Stdout, cmd.Stderr = log, log
	if err := p.Start(cmd); err != nil {
		f.tb.Fatalf("pgha: start %s: %v", p.name, err)
	}
}

func (f *Formation) monitorURL(user string) string {
	return fmt.Sprintf("postgres://%s@127.0.0.1:%d/pg_auto_failover?sslmode=disable", user, f.monitor.port)
}

// DSN is the multi-host URL of the application's database: both nodes,
// target_session_attrs=read-write, so that a connection reaches whichever
// node is the primary.
func (f *Formation) DSN() string {
	hosts := make([]string, len(f.nodes))
	for i, n := range f.nodes {
		hosts[i] = net.JoinHostPort("127.0.0.1", strconv.Itoa(n.port))
	}
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable&target_session_attrs=read-write", strings.Join(hosts, ","), f.database)
}

// NodeURL is the URL of the application's database on one node only.
func (f *Formation) NodeURL(n Node) string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/%s?sslmode=disable", n.Port, f.database)
}

// Log returns what pg_autoctl wrote for every process of the formation and
// the monitor's event list, for a failing test to print.
func (f *Formation) Log() string {
	var b strings.Builder
	for _, p := range append([]*process{f.monitor}, f.nodes...) {
		out, _ := os.ReadFile(filepath.Join(f.root, p.name+".log"))
		fmt.Fprintf(&b, "--- %s\n%s", p.name, out)
	}
	if out, err := f.command("show", "events", "--pgdata", f.monitor.pgdata, "--count", "40").CombinedOutput(); err == nil {
		fmt.Fprintf(&b, "--- events\n%s", out)
	}
	return b.String()
}

func (f *Formation) query(url, q string, dest ...any) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return db.QueryRowContext(ctx, q).Scan(dest...)
}

func (f *Formation) waitMonitor() {
	f.tb.Helper()
	f.waitFor("the monitor to answer", func() (bool, error) {
		var one int
		err := f.query(f.monitorURL("postgres"), "SELECT 1", &one)
		return err == nil, err
	})
}

// waitFor polls cond until it holds; the formation changes state on its
// own (the monitor and the keepers), so a helper can only look.
func (f *Formation) waitFor(what string, cond func() (bool, error)) {
	f.tb.Helper()
	deadline := time.Now().Add(3 * time.Minute)
	for {
		ok, err := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			f.tb.Fatalf("pgha: waited 3m for %s (last: %v)\n%s", what, err, f.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// states returns "reported/goal" per node, in node order: what the
// monitor knows.
func (f *Formation) states() (string, error) {
	var s sql.NullString
	err := f.query(f.monitorURL("postgres"),
		"SELECT string_agg(reportedstate || '/' || goalstate, ',' ORDER BY nodeid) FROM pgautofailover.node", &s)
	return s.String, err
}

// waitStates waits until every node reports the state the monitor assigned
// it and those states, in any order, are want.
func (f *Formation) waitStates(want ...string) {
	f.tb.Helper()
	f.waitFor("nodes in states "+strings.Join(want, ", "), func() (bool, error) {
		s, err := f.states()
		if err != nil {
			return false, err
		}
		got := map[string]int{}
		for _, pair := range strings.Split(s, ",") {
			reported, goal, _ := strings.Cut(pair, "/")
			if reported != goal {
				return false, fmt.Errorf("states %s", s)
			}
			got[reported]++
		}
		for _, w := range want {
			got[w]--
		}
		for _, c := range got {
			if c != 0 {
				return false, fmt.Errorf("states %s", s)
			}
		}
		return true, nil
	})
}

// WaitReplicated waits until one node is the primary, the other its
// standby, and the primary's commits wait for the standby
// (synchronous_standby_names is set).
func (f *Formation) WaitReplicated() {
	f.tb.Helper()
	f.waitStates("primary", "secondary")
	f.waitFor("synchronous replication", func() (bool, error) {
		var names string
		err := f.query(f.DSN(), "SHOW synchronous_standby_names", &names)
		if err == nil && names == "" {
			err = errors.New("synchronous_standby_names is empty")
		}
		return err == nil, err
	})
}

// Primary returns the node the monitor holds for the primary (assigned
// primary, wait_primary or single).
func (f *Formation) Primary() Node {
	f.tb.Helper()
	var n Node
	err := f.query(f.monitorURL("postgres"),
		"SELECT nodename, nodeport FROM pgautofailover.node WHERE goalstate IN ('primary', 'wait_primary', 'single') ORDER BY nodeid LIMIT 1",
		&n.Name, &n.Port)
	if err != nil {
		f.tb.Fatalf("pgha: the primary: %v\n%s", err, f.Log())
	}
	return n
}

func (f *Formation) node(n Node) *process {
	for _, p := range f.nodes {
		if p.name == n.Name {
			return p
		}
	}
	f.tb.Fatalf("pgha: no node %q", n.Name)
	return nil
}

// PerformFailover is the operator's switchover (pg_autoctl perform
// failover): the primary is demoted, the standby promoted. It returns once
// the monitor reports the failover done; the old primary then catches up
// as the standby ([Formation.WaitReplicated]). It returns the new primary.
func (f *Formation) PerformFailover() Node {
	f.tb.Helper()
	old := f.Primary()
	args := []string{"perform", "failover", "--pgdata", f.monitor.pgdata, "--wait", "60"}
	for attempt := 1; ; attempt++ {
		out, err := f.command(args...).CombinedOutput()
		if err == nil {
			break
		}
		// The monitor's perform_failover can deadlock with its own
		// health checks on a loaded machine; it rolled back, so run it
		// again.
		if attempt == 5 || !strings.Contains(string(out), "deadlock detected") {
			f.tb.Fatalf("pgha: pg_autoctl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		time.Sleep(200 * time.Millisecond)
	}
	f.waitFor("a new primary", func() (bool, error) { return f.Primary() != old, nil })
	return f.Primary()
}

// KillPrimary sends SIGKILL to the primary's postmaster and to its keeper
// (pg_autoctl run) together, as when the machine is lost: a keeper alive
// would restart the postmaster in place, which is a restart, not a
// failover. The monitor promotes the standby; [Formation.Rejoin] brings the
// killed node back. It returns the killed node.
func (f *Formation) KillPrimary() Node {
	f.tb.Helper()
	n := f.Primary()
	if !f.node(n).Kill() {
		f.tb.Fatalf("pgha: %s is not running", n.Name)
	}
	return n
}

// StopPrimary stops the primary's keeper and its postmaster (pg_autoctl
// stop, a fast shutdown) and waits until they are gone. The monitor
// promotes the standby; [Formation.Rejoin] brings the stopped node back.
// It returns the stopped node.
func (f *Formation) StopPrimary() Node {
	f.tb.Helper()
	n := f.Primary()
	f.stop(f.node(n))
	return n
}

// Rejoin starts a killed or stopped node again; its keeper makes it the
// standby of the current primary (rewinding it if it must).
func (f *Formation) Rejoin(n Node) {
	f.tb.Helper()
	f.start(f.node(n))
}

// Standby returns the node that is not the primary: a hot standby, which
// answers reads.
func (f *Formation) Standby() Node {
	f.tb.Helper()
	primary := f.Primary()
	for _, p := range f.nodes {
		if p.name != primary.Name {
			return Node{Name: p.name, Port: p.port}
		}
	}
	f.tb.Fatal("pgha: no standby")
	return Node{}
}

// PauseReplay stops the standby from applying the WAL it receives (and
// still flushes it, so synchronous commits go on): from its return the
// standby is a replica that lags, by every commit after it, until
// [Formation.ResumeReplay].
func (f *Formation) PauseReplay() {
	f.tb.Helper()
	url := f.NodeURL(f.Standby())
	var ignored string
	if err := f.query(url, "SELECT pg_wal_replay_pause()::text", &ignored); err != nil {
		f.tb.Fatalf("pgha: pause replay: %v", err)
	}
	f.waitFor("the standby's replay to pause", func() (bool, error) {
		var state string
		err := f.query(url, "SELECT pg_get_wal_replay_pause_state()", &state)
		return state == "paused", err
	})
}

// ResumeReplay lets the standby apply the WAL again and returns once it
// has applied everything the primary had written when it was called.
func (f *Formation) ResumeReplay() {
	f.tb.Helper()
	url := f.NodeURL(f.Standby())
	var ignored string
	if err := f.query(url, "SELECT pg_wal_replay_resume()::text", &ignored); err != nil {
		f.tb.Fatalf("pgha: resume replay: %v", err)
	}
	f.CatchUp()
}

// CatchUp returns once the standby has applied every WAL record the
// primary had written when it was called.
func (f *Formation) CatchUp() {
	f.tb.Helper()
	var lsn string
	if err := f.query(f.NodeURL(f.Primary()), "SELECT pg_current_wal_lsn()::text", &lsn); err != nil {
		f.tb.Fatalf("pgha: the primary's WAL position: %v", err)
	}
	url := f.NodeURL(f.Standby())
	f.waitFor("the standby to apply "+lsn, func() (bool, error) {
		var done bool
		err := f.query(url, "SELECT pg_last_wal_replay_lsn() >= '"+lsn+"'::pg_lsn", &done)
		return done, err
	})
}

// Restart restarts the formation's PostgreSQL servers, as when both
// machines reboot: the standby is stopped first (pg_autoctl stop, a fast
// shutdown) and, once the monitor has seen it go (the primary is in
// wait_primary), the primary; then the primary starts again and, once it
// takes writes, the standby. The monitor runs throughout and has no
// standby to promote while the primary is down, so the primary stays the
// primary. It returns once the pair is synchronous again, with how long
// the primary took no writes (from its stop to its first write accepted).
//
// Restarting the primary's PostgreSQL alone is not a restart here: its
// keeper reports Postgres not running, the monitor marks the node
// unhealthy at once and promotes the standby, which is a failover.
func (f *Formation) Restart() (down time.Duration) {
	f.tb.Helper()
	primary, standby := f.Primary(), f.Standby()
	f.stop(f.node(standby))
	f.waitFor("the primary to report wait_primary", func() (bool, error) {
		var state string
		err := f.query(f.monitorURL("postgres"), fmt.Sprintf(
			"SELECT reportedstate || '/' || goalstate FROM pgautofailover.node WHERE nodename = '%s'", primary.Name), &state)
		return state == "wait_primary/wait_primary", err
	})
	stopped := time.Now()
	f.stop(f.node(primary))
	f.start(f.node(primary))
	f.waitFor("the primary to take writes", func() (bool, error) {
		var ro string
		err := f.query(f.NodeURL(primary), "SHOW transaction_read_only", &ro)
		return err == nil && ro == "off", err
	})
	down = time.Since(stopped)
	f.start(f.node(standby))
	f.WaitReplicated()
	if now := f.Primary(); now != primary {
		f.tb.Fatalf("pgha: the restart moved the primary from %s to %s\n%s", primary.Name, now.Name, f.Log())
	}
	return down
}

// stop runs pg_autoctl stop --fast for p and waits until its pg_autoctl
// run is gone.
func (f *Formation) stop(p *process) {
	f.tb.Helper()
	f.run("stop", "--pgdata", p.pgdata, "--fast")
	if !p.Stopped(60 * time.Second) {
		f.tb.Fatalf("pgha: %s did not stop\n%s", p.name, f.Log())
	}
}
