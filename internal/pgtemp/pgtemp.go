package pgtemp

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	_ "github.com/retrysafe/retrysafe/framework/store/storepg" // and so database/sql driver "pgx"
)

// Server is a PostgreSQL server owned by one test.
type Server struct {
	tb     testing.TB
	bin    string // directory of initdb, pg_ctl, postgres
	dir    string // data directory and socket directory
	port   int
	asUser string // run commands as this user (root only)
}

// Start creates and starts a server; it is killed and removed when the
// test ends. The test is skipped when no PostgreSQL binaries are found.
func Start(tb testing.TB) *Server {
	tb.Helper()
	bin := BinDir()
	if bin == "" {
		tb.Skip("pgtemp: no PostgreSQL binaries (initdb) on PATH or under /usr/lib/postgresql")
	}
	root, err := os.MkdirTemp("", "pgtemp-")
	if err != nil {
		tb.Fatalf("pgtemp: %v", err)
	}
	s := &Server{tb: tb, bin: bin, dir: filepath.Join(root, "data")}
	tb.Cleanup(func() {
		_ = s.pgctl("stop", "-m", "immediate", "-w")
		_ = os.RemoveAll(root)
	})
	if err := os.Mkdir(s.dir, 0o700); err != nil {
		tb.Fatalf("pgtemp: %v", err)
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			tb.Skip("pgtemp: running as root and there is no postgres user for initdb")
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		for _, d := range []string{root, s.dir} {
			if err := os.Chown(d, uid, gid); err != nil {
				tb.Fatalf("pgtemp: %v", err)
			}
		}
		s.asUser = "postgres"
	}
	if out, err := s.command("initdb", "-D", s.dir, "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync", "--locale=C").CombinedOutput(); err != nil {
		tb.Fatalf("pgtemp: initdb: %v\n%s", err, out)
	}
	s.port = FreePort(tb)
	conf := fmt.Sprintf("\nport = %d\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '%s'\nfsync = off\nmax_connections = 200\nlog_min_messages = fatal\n", s.port, s.dir)
	f, err := os.OpenFile(filepath.Join(s.dir, "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		tb.Fatalf("pgtemp: %v", err)
	}
	_, err = f.WriteString(conf)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		tb.Fatalf("pgtemp: %v", err)
	}
	s.Restart()
	return s
}

// BinDir returns the directory of the PostgreSQL server binaries, or "" when
// there are none.
func BinDir() string {
	if p, err := exec.LookPath("initdb"); err == nil {
		return filepath.Dir(p)
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool { return version(dirs[i]) > version(dirs[j]) })
	for _, d := range dirs {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err == nil {
			return d
		}
	}
	return ""
}

func version(binDir string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return n
}

// FreePort returns a TCP port of 127.0.0.1 that was free a moment ago.
func FreePort(tb testing.TB) int {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("pgtemp: %v", err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// command runs a PostgreSQL binary, as the postgres user under root.
func (s *Server) command(name string, args ...string) *exec.Cmd {
	path := filepath.Join(s.bin, name)
	if s.asUser != "" {
		return exec.Command("runuser", append([]string{"-u", s.asUser, "--", path}, args...)...)
	}
	return exec.Command(path, args...)
}

func (s *Server) pgctl(args ...string) error {
	args = append([]string{"-D", s.dir}, args...)
	out, err := s.command("pg_ctl", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("pg_ctl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return nil
}

// Port is the server's TCP port on 127.0.0.1.
func (s *Server) Port() int { return s.port }

// Addr is the server's HOST:PORT.
func (s *Server) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(s.port)) }

// URL returns a postgres:// URL for database db as user postgres.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", s.Addr(), db)
}

// CreateDatabase creates database name and returns its URL.
func (s *Server) CreateDatabase(name string) string {
	s.tb.Helper()
	db, err := sql.Open("pgx", s.URL("postgres"))
	if err != nil {
		s.tb.Fatalf("pgtemp: %v", err)
	}
	defer db.Close()
	if _, err := db.ExecContext(context.Background(), "CREATE DATABASE "+name); err != nil {
		s.tb.Fatalf("pgtemp: create database %s: %v", name, err)
	}
	return s.URL(name)
}

// Kill stops the server at once, as a crash would: pg_ctl stop -m
// immediate. Clients see their connections reset; the next start runs
// crash recovery.
func (s *Server) Kill() {
	s.tb.Helper()
	if err := s.pgctl("stop", "-m", "immediate", "-w"); err != nil {
		s.tb.Fatalf("pgtemp: %v", err)
	}
}

// Restart starts the server (again) on the same port and data directory
// and waits until it accepts connections.
func (s *Server) Restart() {
	s.tb.Helper()
	if err := s.pgctl("start", "-w", "-t", "60", "-l", filepath.Join(s.dir, "server.log")); err != nil {
		s.tb.Fatalf("pgtemp: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		db, err := sql.Open("pgx", s.URL("postgres"))
		if err == nil {
			err = db.PingContext(context.Background())
			db.Close()
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("pgtemp: server does not answer: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
