package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

type options struct {
	db         string
	clients    int
	duration   time.Duration
	rounds     int
	scenarios  string
	prefill    int
	pool       int
	serverProc bool
	cpuProfile string
	jsonPath   string
	chartPath  string
	progress   bool
	scale      bool
	scaleSizes []int
	janitor    int
	soak       time.Duration
	replica    string
	// off names the speed tricks of the store the server runs without
	// ([tricks]).
	off string
}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.db, "db", "", `database: "sqlite:PATH", a postgres:// URL or a mysql:// URL (MariaDB) (default: a temporary SQLite file)`)
	fs.IntVar(&o.clients, "c", 32, "concurrent clients")
	fs.DurationVar(&o.duration, "d", 3*time.Second, "duration of one scenario in one round")
	fs.IntVar(&o.rounds, "rounds", 3, "interleaved rounds; figures are medians over them")
	fs.StringVar(&o.scenarios, "scenarios", "", "comma-separated scenarios to run (default all)")
	fs.IntVar(&o.prefill, "prefill", 200, "resources created before the rounds for each replay or read scenario")
	fs.IntVar(&o.pool, "pool", 0, "database pool size of the server (default 32 on PostgreSQL and MariaDB, as the baselines; the store's default on SQLite)")
	fs.BoolVar(&o.serverProc, "server-proc", false, "run the server as a child process (server CPU alone)")
	fs.StringVar(&o.cpuProfile, "cpuprofile", "", "write a CPU profile of the server to this file")
	fs.StringVar(&o.jsonPath, "json", "", "write the results as JSON to this file")
	fs.StringVar(&o.chartPath, "chart", "", "draw throughput and latency to this SVG (or .png) file")
	fs.BoolVar(&o.progress, "progress", true, "show a progress bar on stderr")
	fs.BoolVar(&o.scale, "scale", false, "scale mode: create throughput and replay p99 at table sizes -scale-sizes, and p99 under the janitor")
	sizes := fs.String("scale-sizes", "0,100000,1000000", "scale mode: rows bulk-loaded into the orders and idempotency-record tables")
	fs.IntVar(&o.janitor, "janitor-rows", 1000000, "scale mode: expired records the janitor deletes under load")
	fs.DurationVar(&o.soak, "soak", 0, "soak mode: mixed load for this long, sampling the server's RSS and goroutines")
	fs.StringVar(&o.off, "off", "", "comma-separated speed tricks of the store the server runs without, to measure what each saves: "+
		"row-plans (store.Config.DisableRowPlans), insert-first (a negative store.Config.ClockMaxAge: every create reads first)")
	fs.StringVar(&o.replica, "replica", "", "a postgres:// URL of a hot standby of -db's server (its path is replaced by the run's database): "+
		"the scenarios that may read a replica (get, post-local-replay, payments-replay; the legacy POST route replays on the primary) run again, as NAME@replica, "+
		"on a second server that reads it")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if o.replica != "" && !strings.HasPrefix(o.replica, "postgres://") && !strings.HasPrefix(o.replica, "postgresql://") {
		return o, errors.New("-replica must be a postgres:// URL (a hot standby of -db)")
	}
	if o.clients < 1 || o.duration <= 0 || o.rounds < 1 || o.prefill < 1 || o.pool < 0 {
		return o, errors.New("-c, -d, -rounds and -prefill must be positive")
	}
	for s := range strings.SplitSeq(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 0 {
			return o, fmt.Errorf("-scale-sizes: %q is not a row count", s)
		}
		o.scaleSizes = append(o.scaleSizes, n)
	}
	return o, nil
}

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) > 0 && args[0] == "serve" {
		return runServe(args[1:], stdout, stderr)
	}
	o, err := parseOptions(args, stderr)
	if err != nil {
		return err
	}
	db, err := openDatabase(ctx, o.db)
	if err != nil {
		return err
	}
	defer db.Close()
	if o.pool == 0 && db.Dialect != "sqlite" {
		o.pool = 32
	}

	if o.cpuProfile != "" && !o.serverProc {
		f, err := os.Create(o.cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	start := func(replica, cpuProfile string) (target, error) {
		dsn, err := db.serverDSN(replica != "")
		if err != nil {
			return nil, err
		}
		if o.serverProc {
			return startChild(ctx, dsn, replica, o.pool, o.off, cpuProfile, stderr)
		}
		return startInProcess(ctx, dsn, replica, o.pool, o.off)
	}
	srv, err := start("", o.cpuProfile)
	if err != nil {
		return err
	}
	defer srv.Close()

	b := &bench{o: o, db: db, srv: srv, appName: serverAppName(false), load: newLoader(srv.URL(), o.clients), stdout: stdout, stderr: stderr,
		nonce: strconv.FormatInt(time.Now().UnixNano(), 36), dbCPU: serverProcesses[db.Dialect] != nil && localServer(db.DSN)}
	if o.replica != "" {
		if db.Dialect != "postgres" {
			return errors.New("bench: -replica needs a postgres:// -db")
		}
		replica, err := db.replicaDSN(o.replica)
		if err != nil {
			return err
		}
		if b.replica, err = start(replica, ""); err != nil {
			return err
		}
		defer b.replica.Close()
		b.replicaLoad, b.replicaURL = newLoader(b.replica.URL(), o.clients), replica
	}
	st, err := b.stats(ctx)
	if err != nil {
		return err
	}
	rep := &Report{Started: time.Now().UTC(), Machine: machine(ctx, db), Config: reportConfig{
		Dialect: db.Dialect, Clients: o.clients, Duration: o.duration.String(), Rounds: o.rounds,
		Pool: st.Pool, ServerProc: o.serverProc, CPUScope: srv.CPUScope(), Prefill: o.prefill, Off: o.off,
	}}
	switch {
	case o.soak > 0:
		if rep.Soak, err = b.runSoak(ctx); err != nil {
			return err
		}
		printSoak(stdout, rep.Soak)
	case o.scale:
		if rep.Scale, err = b.runScale(ctx); err != nil {
			return err
		}
		printScale(stdout, rep.Scale)
	default:
		if rep.Results, err = b.runScenarios(ctx); err != nil {
			return err
		}
		printTable(stdout, rep)
		if o.chartPath != "" {
			if err := drawChart(o.chartPath, rep); err != nil {
				return err
			}
		}
	}
	if o.jsonPath != "" {
		out, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		if err := os.WriteFile(o.jsonPath, append(out, '\n'), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// bench is one run of the bench against one server.
type bench struct {
	o   options
	db  *database
	srv target
	// appName is the application_name srv's PostgreSQL sessions carry
	// ([database.serverDSN]).
	appName string
	load    *loader
	stdout  io.Writer
	stderr  io.Writer
	// nonce is part of every key and ID, so that two bench runs on one
	// database never share one.
	nonce string
	runs  int
	// dbCPU: the database server (PostgreSQL or MariaDB) runs on this
	// machine, whose /proc gives its processes' CPU.
	dbCPU bool
	// replica is the second server of -replica, which reads the standby
	// at replicaURL; replicaLoad sends the @replica scenarios to it.
	replica     target
	replicaLoad *loader
	replicaURL  string
}

func (b *bench) newBar(total int, what string) *progressbar.ProgressBar {
	if !b.o.progress {
		return progressbar.DefaultSilent(int64(total))
	}
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(b.stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond))
}

func (b *bench) runScenarios(ctx context.Context) ([]Result, error) {
	scs, err := selectScenarios(b.o.scenarios, b.db.Dialect)
	if err != nil {
		return nil, err
	}
	bar := b.newBar(len(scs)*(b.o.rounds+1), "preparing")
	for _, sc := range scs {
		if sc.prepare != nil {
			if err := sc.prepare(ctx, b.load, b.o.prefill); err != nil {
				return nil, err
			}
		}
		_ = bar.Add(1)
	}
	if err := b.settle(ctx); err != nil {
		return nil, err
	}
	if b.replica != nil {
		scs = withReplicaTwins(scs)
		// The rounds start from a standby that has applied what was
		// prepared, so that its reads are answered there.
		if err := b.db.waitReplayed(ctx, b.replicaURL); err != nil {
			return nil, err
		}
	}
	samples := make([][]*sample, len(scs))
	for round := range b.o.rounds {
		for i, sc := range scs {
			bar.Describe(fmt.Sprintf("round %d/%d %-18s", round+1, b.o.rounds, sc.name))
			s, err := b.measure(ctx, sc, b.o.duration)
			if err != nil {
				return nil, err
			}
			samples[i] = append(samples[i], s)
			_ = bar.Add(1)
		}
	}
	_ = bar.Finish()
	return summarize(scs, samples), nil
}

// settleRows is how many orders settle loads before the rounds.
const settleRows = 10000

// settle brings the tables to the state of a deployment that has been
// running for a minute: rows in them and planner statistics. PostgreSQL
// plans a statement on a table with no statistics as best it can and keeps
// that plan for the connection's life: the foreign-key check of every
// order_items insert, planned on the empty orders table, took one of the
// orders' list indexes (each starts with tenant_id and ends with id) over
// the primary key and scanned all of the tenant's orders, a little more
// with every create. In a deployment autovacuum analyzes a table that grew
// by 10% within a minute and so replaces those plans; a round of seconds
// on a new database would measure only that first minute. ANALYZE of a
// table with rows makes the primary key the clear choice and invalidates
// the plans made before it; of an empty table it would favour a sequential
// scan, so orders are bulk-loaded first. They are tenant acme's, the
// tenant of the bench's requests: statistics that saw another tenant
// alone would make tenant_id = 'acme' look as if it matched no row, and
// every index led by tenant_id as good as the primary key for a lookup
// by (tenant_id, id). PostgreSQL then took idx_orders_customer for the
// PUT's read-first and scanned all of acme's orders (1,010 buffers and 8
// ms for one lookup after a dozen rounds): the fall in put-create's
// throughput from round to round. On MariaDB InnoDB recomputes a table's
// persistent statistics by itself once a tenth of its rows changed;
// ANALYZE TABLE computes them at once, so that both databases plan on the
// same 10,000 orders.
func (b *bench) settle(ctx context.Context) error {
	bulk, err := bulkDB(b.db)
	if err != nil {
		return err
	}
	defer bulk.Close()
	if err := bulkOrders(ctx, bulk, b.db.Dialect, "acme", settleRows); err != nil {
		return err
	}
	return analyze(ctx, bulk, b.db.Dialect, "orders", "order_items")
}

// measure runs sc once for d and attaches the server's CPU and, on
// PostgreSQL, the commits it cost.
func (b *bench) measure(ctx context.Context, sc *scenario, d time.Duration) (*sample, error) {
	if sc.onReplica {
		// The same measure, against the server that reads the standby.
		on := *b
		on.srv, on.load, on.replica, on.appName = b.replica, b.replicaLoad, nil, serverAppName(true)
		s, err := on.measure(ctx, &scenario{name: sc.name, next: sc.next, allowNon2xx: sc.allowNon2xx}, d)
		b.runs = on.runs
		return s, err
	}
	c0, err := b.commits(ctx)
	if err != nil {
		return nil, err
	}
	w0, err := b.db.writesMark(ctx)
	if err != nil {
		return nil, err
	}
	st0, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	var db0 procTicks
	if b.dbCPU {
		db0 = serverTicks(serverProcesses[b.db.Dialect])
	}
	b.runs++
	s, err := b.load.run(ctx, sc, b.nonce+"r"+strconv.Itoa(b.runs), d)
	if err != nil {
		return nil, err
	}
	if db0 != nil {
		s.DBCPU = serverTicks(serverProcesses[b.db.Dialect]).since(db0)
	}
	st1, err := b.stats(ctx)
	if err != nil {
		return nil, err
	}
	s.CPU = float64(st1.CPUNanos-st0.CPUNanos) / 1e9
	c1, err := b.commits(ctx)
	if err != nil {
		return nil, err
	}
	if c0 >= 0 {
		s.Commits = c1 - c0
	}
	w1, err := b.db.writesMark(ctx)
	if err != nil {
		return nil, err
	}
	if s.WALCommits, err = b.db.writesBetween(ctx, w0, w1); err != nil {
		return nil, err
	}
	return s, nil
}

// commits reads the commit counter, -1 on SQLite. PostgreSQL publishes
// a backend's counters as it exits, so the server's pool is idled first
// and the count waits for every backend the server had open before that
// to be gone; MariaDB's counters are live.
func (b *bench) commits(ctx context.Context) (int64, error) {
	if b.db.Dialect != "postgres" {
		return b.db.commits(ctx, time.Time{}, "")
	}
	before, err := b.db.now(ctx)
	if err != nil {
		return 0, err
	}
	if err := b.post(ctx, "/_bench/idle", nil); err != nil {
		return 0, err
	}
	return b.db.commits(ctx, before, b.appName)
}

func (b *bench) stats(ctx context.Context) (serverStats, error) {
	var st serverStats
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.srv.URL()+"/_bench/stats", nil)
	if err != nil {
		return st, err
	}
	res, err := b.load.http.Do(req)
	if err != nil {
		return st, err
	}
	defer res.Body.Close()
	return st, json.NewDecoder(res.Body).Decode(&st)
}

func (b *bench) post(ctx context.Context, path string, out any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.srv.URL()+path, nil)
	if err != nil {
		return err
	}
	res, err := b.load.http.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(res.Body)
		return fmt.Errorf("bench: %s: %d %s", path, res.StatusCode, msg)
	}
	if out == nil {
		_, err = io.Copy(io.Discard, res.Body)
		return err
	}
	return json.NewDecoder(res.Body).Decode(out)
}

// summarize reduces each scenario's rounds to medians.
func summarize(scs []*scenario, samples [][]*sample) []Result {
	ran := map[string]int{}
	for i, sc := range scs {
		ran[sc.name] = i
	}
	reqPerSec := func(i int) []float64 {
		var rps []float64
		for _, s := range samples[i] {
			rps = append(rps, s.reqPerSec())
		}
		return rps
	}
	out := make([]Result, len(scs))
	for i, sc := range scs {
		r := Result{Scenario: sc.name, About: sc.about, CommitsPerRequest: -1, WALCommitsPerRequest: -1, CPUPerRequestUs: -1, DBCPUPerRequestUs: -1}
		var rps, p50, p99, commits, walCommits, cpu, dbCPU []float64
		for _, s := range samples[i] {
			rps = append(rps, s.reqPerSec())
			p50 = append(p50, percentile(s.Latencies, 0.50))
			p99 = append(p99, percentile(s.Latencies, 0.99))
			if s.Commits >= 0 && s.Requests > 0 {
				commits = append(commits, float64(s.Commits)/float64(s.Requests))
			}
			if s.WALCommits >= 0 && s.Requests > 0 {
				walCommits = append(walCommits, float64(s.WALCommits)/float64(s.Requests))
			}
			if s.CPU >= 0 && s.Requests > 0 {
				cpu = append(cpu, s.CPU*1e6/float64(s.Requests))
			}
			if s.DBCPU >= 0 && s.Requests > 0 {
				dbCPU = append(dbCPU, s.DBCPU*1e6/float64(s.Requests))
			}
			r.Requests += s.Requests
			r.Non2xx += s.Non2xx
			r.Rounds = append(r.Rounds, Round{ReqPerSec: s.reqPerSec(), P50Ms: percentile(s.Latencies, 0.5),
				P99Ms: percentile(s.Latencies, 0.99), Requests: s.Requests, Non2xx: s.Non2xx, Statuses: s.Statuses,
				Commits: s.Commits, WALCommits: s.WALCommits, CPUSeconds: s.CPU, DBCPUSeconds: s.DBCPU})
			if s.Hot != nil {
				if r.HotKey == nil {
					r.HotKey = &hotCounts{}
				}
				r.HotKey.Keys += s.Hot.Keys
				r.HotKey.Effects += s.Hot.Effects
				r.HotKey.Replays += s.Hot.Replays
				r.HotKey.InProgress += s.Hot.InProgress
				r.HotKey.Bad += s.Hot.Bad
			}
		}
		r.ReqPerSec, r.P50Ms, r.P99Ms = median(rps), median(p50), median(p99)
		if len(commits) > 0 {
			r.CommitsPerRequest = median(commits)
		}
		if len(walCommits) > 0 {
			r.WALCommitsPerRequest = median(walCommits)
		}
		if len(cpu) > 0 {
			r.CPUPerRequestUs = median(cpu)
		}
		if len(dbCPU) > 0 {
			r.DBCPUPerRequestUs = median(dbCPU)
		}
		for _, base := range sc.baselines() {
			if b, ok := ran[base]; ok {
				r.Ratios = append(r.Ratios, ratio(base, rps, reqPerSec(b)))
			}
		}
		r.AllowNon2xx = sc.allowNon2xx
		out[i] = r
	}
	return out
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// machine describes where the bench ran.
func machine(ctx context.Context, db *database) Machine {
	m := Machine{CPUs: runtime.NumCPU(), GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, Go: runtime.Version(), Database: db.Dialect}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "model name"); ok {
				m.CPUModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	var v string
	switch db.Dialect {
	case "postgres":
		if err := db.admin.QueryRowContext(ctx, "SHOW server_version").Scan(&v); err == nil {
			m.Database = "PostgreSQL " + v
		}
	case "mysql":
		// 10.11.19-MariaDB-0+deb12u1: the version, then the build.
		if err := db.admin.QueryRowContext(ctx, "SELECT VERSION()").Scan(&v); err == nil {
			version, _, _ := strings.Cut(v, "-")
			m.Database = "MariaDB " + version
		}
	default:
		m.Database = "SQLite (modernc.org/sqlite, WAL)"
	}
	return m
}
