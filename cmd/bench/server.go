package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/store"
)

// benchServer is the demo's router and stores, plus the naive baseline on
// the same pool and a few bench-only endpoints under /_bench/ (idle the
// pool so that PostgreSQL publishes its commit counters, run the janitor,
// report the process's CPU, RSS and goroutines).
type benchServer struct {
	app   *app.App
	naive http.Handler
	pool  int
	// stopRelay ends the naive outbox's relay; relayDone closes after.
	stopRelay context.CancelFunc
	relayDone chan struct{}
}

// tricks are the store's speed tricks that -off turns off, each by its
// switch in store.Config.
var tricks = map[string]func(*store.Config){
	"row-plans":    func(c *store.Config) { c.DisableRowPlans = true },
	"insert-first": func(c *store.Config) { c.ClockMaxAge = -1 },
}

// storeConfig is the server's store.Config: a pool of pool, the replica,
// and the tricks named in off (comma-separated) turned off.
func storeConfig(pool int, replica, off string) (store.Config, error) {
	cfg := store.Config{MaxOpenConns: pool, ReplicaDSN: replica}
	for name := range strings.SplitSeq(off, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		turnOff, ok := tricks[name]
		if !ok {
			return cfg, fmt.Errorf("bench: -off %q: not a trick of the store (row-plans, insert-first)", name)
		}
		turnOff(&cfg)
	}
	return cfg, nil
}

func newBenchServer(ctx context.Context, dsn, replica string, pool int, off string) (*benchServer, error) {
	gin.SetMode(gin.ReleaseMode)
	cfg, err := storeConfig(pool, replica, off)
	if err != nil {
		return nil, err
	}
	a, err := app.New(ctx, app.Config{DSN: dsn, Store: cfg})
	if err != nil {
		return nil, err
	}
	naive, naiveDB, err := newNaive(a.DB.SQL(), a.DB.Driver.Name())
	if err != nil {
		_ = a.Close()
		return nil, err
	}
	if err := a.Start(ctx); err != nil {
		_ = a.Close()
		return nil, err
	}
	relayCtx, stopRelay := context.WithCancel(context.WithoutCancel(ctx))
	s := &benchServer{app: a, naive: naive, pool: a.DB.SQL().Stats().MaxOpenConnections, stopRelay: stopRelay, relayDone: make(chan struct{})}
	go func() {
		defer close(s.relayDone)
		runNaiveRelay(relayCtx, naiveDB, a.DB.Driver.Name(), slog.Default())
	}()
	return s, nil
}

func (s *benchServer) Close() error {
	s.stopRelay()
	<-s.relayDone
	return s.app.Close()
}

func (s *benchServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch p := r.URL.Path; {
	case strings.HasPrefix(p, "/naive/"):
		s.naive.ServeHTTP(w, r)
	case strings.HasPrefix(p, "/_bench/"):
		s.serveBench(w, r)
	default:
		s.app.Handler().ServeHTTP(w, r)
	}
}

// serverStats is what GET /_bench/stats answers about the server process.
type serverStats struct {
	CPUNanos   int64 `json:"cpu_ns"`
	RSSBytes   int64 `json:"rss_bytes"`
	Goroutines int   `json:"goroutines"`
	Pool       int   `json:"pool"`
}

func (s *benchServer) serveBench(w http.ResponseWriter, r *http.Request) {
	var out any
	switch r.URL.Path {
	case "/_bench/stats":
		st := serverStats{Goroutines: runtime.NumGoroutine(), RSSBytes: selfRSS(), Pool: s.pool}
		var ru syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err == nil {
			st.CPUNanos = ru.Utime.Nano() + ru.Stime.Nano()
		}
		out = st
	case "/_bench/idle":
		// Closing the pool's connections ends their backends, which
		// publish their transaction counters to pg_stat_database as they
		// exit. With no idle connection allowed, one in use (a relay's)
		// is closed as it is released: this waits, for 5 s at most, until
		// every connection open when it was called is closed, so that the
		// caller can wait for each of their backends to exit.
		sqlDB := s.app.DB.SQL()
		sqlDB.SetMaxIdleConns(0)
		for deadline := time.Now().Add(5 * time.Second); sqlDB.Stats().InUse > 0 && time.Now().Before(deadline); {
			time.Sleep(time.Millisecond)
		}
		sqlDB.SetMaxIdleConns(s.pool)
		out = map[string]int{"open": sqlDB.Stats().OpenConnections}
	case "/_bench/janitor":
		start := time.Now()
		stats, err := s.app.PostKeys.CleanupOnce(r.Context())
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		out = map[string]any{"deleted": stats.Deleted, "batches": stats.Batches, "seconds": time.Since(start).Seconds()}
	default:
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(out)
}

// selfRSS reads the resident set size of this process from /proc.
func selfRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			return kb << 10
		}
	}
	return 0
}

// target is a running server the load is sent to.
type target interface {
	URL() string
	// CPUScope says whose CPU /_bench/stats reports.
	CPUScope() string
	Close() error
}

// inProcess serves a benchServer on a loopback port of this process: its
// CPU figures include the load generator's.
type inProcess struct {
	srv  *benchServer
	http *http.Server
	url  string
}

func startInProcess(ctx context.Context, dsn, replica string, pool int, off string) (*inProcess, error) {
	s, err := newBenchServer(ctx, dsn, replica, pool, off)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = s.Close()
		return nil, err
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	return &inProcess{srv: s, http: hs, url: "http://" + ln.Addr().String()}, nil
}

func (p *inProcess) URL() string { return p.url }

func (p *inProcess) CPUScope() string { return "process (server and load generator in one process)" }

func (p *inProcess) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = p.http.Shutdown(ctx)
	return p.srv.Close()
}

// childProcess runs this binary's "serve" mode as a child process, so that
// its CPU is the server's alone.
type childProcess struct {
	cmd  *exec.Cmd
	url  string
	done chan error
}

func startChild(ctx context.Context, dsn, replica string, pool int, off, cpuProfile string, stderr io.Writer) (*childProcess, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	args := []string{"serve", "-db", dsn, "-replica", replica, "-pool", strconv.Itoa(pool), "-off", off}
	if cpuProfile != "" {
		args = append(args, "-cpuprofile", cpuProfile)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	c := &childProcess{cmd: cmd, done: make(chan error, 1)}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	go func() { c.done <- cmd.Wait() }()
	select {
	case line := <-lines:
		u, ok := strings.CutPrefix(line, "listening ")
		if !ok {
			_ = c.Close()
			return nil, fmt.Errorf("bench: server said %q", line)
		}
		c.url = u
		return c, nil
	case err := <-c.done:
		return nil, fmt.Errorf("bench: server exited: %v", err)
	case <-time.After(2 * time.Minute):
		_ = c.Close()
		return nil, errors.New("bench: server did not start")
	case <-ctx.Done():
		_ = c.Close()
		return nil, ctx.Err()
	}
}

func (c *childProcess) URL() string { return c.url }

func (c *childProcess) CPUScope() string { return "server process" }

func (c *childProcess) Close() error {
	_ = c.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-c.done:
		return err
	case <-time.After(15 * time.Second):
		_ = c.cmd.Process.Kill()
		return <-c.done
	}
}

// runServe is "bench serve": the server half of -server-proc.
func runServe(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dsn := fs.String("db", "", "database DSN")
	replica := fs.String("replica", "", "a hot standby's DSN the server reads (store.Config.ReplicaDSN)")
	pool := fs.Int("pool", 0, "pool size")
	off := fs.String("off", "", "speed tricks of the store turned off (see bench -off)")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the server to this file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	s, err := newBenchServer(ctx, *dsn, *replica, *pool, *off)
	if err != nil {
		return err
	}
	defer s.Close()
	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	hs := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	fmt.Fprintf(stdout, "listening http://%s\n", ln.Addr())
	<-ctx.Done()
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	return hs.Shutdown(shutdown)
}
