package demoproc

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ListeningPrefix starts the line the demo prints once it serves.
const ListeningPrefix = "retrysafe demo listening on "

// Build compiles ./cmd/demo into a temporary directory and returns the
// binary's path.
func Build(tb testing.TB) string {
	tb.Helper()
	bin := filepath.Join(tb.TempDir(), "demo")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/retrysafe/retrysafe/cmd/demo")
	if out, err := cmd.CombinedOutput(); err != nil {
		tb.Fatalf("go build ./cmd/demo: %v\n%s", err, out)
	}
	return bin
}

// Config describes a demo process.
type Config struct {
	// Bin is the binary from [Build]. Required.
	Bin string
	// DSN is passed as -db. Required.
	DSN string
	// Addr is passed as -addr. Defaults to "127.0.0.1:0"; the first start
	// fixes the port, which every [Process.Restart] reuses.
	Addr string
	// Args are further flags (e.g. "-lease", "2s").
	Args []string
	// Env is added to the environment, which otherwise has DATABASE_URL
	// and DEMO_API_TOKENS cleared. Defaults to nothing.
	Env []string
}

// Process is one running demo binary, restartable on the same address.
type Process struct {
	tb  testing.TB
	cfg Config

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	log    bytes.Buffer // stderr of every run
	url    string
	lines  chan string
}

// Start runs the demo and returns once it listens; it is killed and reaped
// when the test ends.
func Start(tb testing.TB, cfg Config) *Process {
	tb.Helper()
	if cfg.Addr == "" {
		cfg.Addr = "127.0.0.1:0"
	}
	p := &Process{tb: tb, cfg: cfg, lines: make(chan string, 1024)}
	tb.Cleanup(p.Kill)
	p.start()
	return p
}

// URL is the process's base URL, e.g. http://127.0.0.1:41234.
func (p *Process) URL() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.url
}

// Lines delivers the stdout lines every run prints after it listens (the
// -pause-at hold lines, for instance); lines nobody reads in time are
// dropped.
func (p *Process) Lines() <-chan string { return p.lines }

// Log returns what every run of the process wrote to stderr.
func (p *Process) Log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.log.String()
}

type logWriter struct{ p *Process }

func (w logWriter) Write(b []byte) (int, error) {
	w.p.mu.Lock()
	defer w.p.mu.Unlock()
	return w.p.log.Write(b)
}

func (p *Process) start() {
	p.tb.Helper()
	for attempt := 1; ; attempt++ {
		err := p.startOnce()
		if err == nil {
			return
		}
		// A restarted process may find its port still held for a moment.
		if attempt == 20 || !strings.Contains(err.Error(), "address already in use") {
			p.tb.Fatalf("demoproc: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (p *Process) startOnce() error {
	args := append([]string{"-addr", p.cfg.Addr, "-db", p.cfg.DSN}, p.cfg.Args...)
	cmd := exec.Command(p.cfg.Bin, args...)
	cmd.Env = append(append(os.Environ(), "DATABASE_URL=", "DEMO_API_TOKENS="), p.cfg.Env...)
	var runLog bytes.Buffer
	cmd.Stderr = io.MultiWriter(logWriter{p}, &syncWriter{w: &runLog})
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), ListeningPrefix); ok {
				ready <- strings.TrimSpace(addr)
				break
			}
		}
		for sc.Scan() {
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	select {
	case url := <-ready:
		p.mu.Lock()
		p.cmd, p.exited, p.url = cmd, exited, url
		p.cfg.Addr = strings.TrimPrefix(url, "http://")
		p.mu.Unlock()
		return nil
	case <-exited:
		return fmt.Errorf("the demo exited before listening; stderr:\n%s", runLog.String())
	case <-time.After(60 * time.Second):
		_ = cmd.Process.Kill()
		<-exited
		return fmt.Errorf("the demo did not listen within 60s; stderr:\n%s", runLog.String())
	}
}

type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}

// Kill sends SIGKILL and waits until the process is gone. Killing a process
// that is not running does nothing.
func (p *Process) Kill() {
	p.mu.Lock()
	cmd, exited := p.cmd, p.exited
	p.cmd = nil
	p.mu.Unlock()
	if cmd == nil {
		return
	}
	_ = cmd.Process.Signal(syscall.SIGCONT) // a stopped process dies too
	_ = cmd.Process.Kill()
	<-exited
}

// Restart starts the process again on the same address after [Process.Kill].
func (p *Process) Restart() {
	p.tb.Helper()
	p.Kill()
	p.start()
}

// Signal sends sig (e.g. SIGSTOP, SIGCONT) to the running process.
func (p *Process) Signal(sig syscall.Signal) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil {
		return fmt.Errorf("demoproc: not running")
	}
	return p.cmd.Process.Signal(sig)
}
