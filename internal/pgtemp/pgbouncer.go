package pgtemp

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// BouncerConfig tunes [Server.StartPgBouncer].
type BouncerConfig struct {
	// PoolMode is pgbouncer's pool_mode. Defaults to "transaction".
	PoolMode string
	// DefaultPoolSize is the server connections per database and user.
	// Defaults to 20.
	DefaultPoolSize int
	// IgnoreStartupParameters lists startup parameters pgbouncer accepts
	// from clients and drops. Defaults to extra_float_digits (pgx sends it)
	// and the timeouts a DSN may carry (lock_timeout, statement_timeout,
	// idle_in_transaction_session_timeout): a DSN parameter becomes a
	// startup parameter, which pgbouncer otherwise refuses.
	IgnoreStartupParameters string
}

// Bouncer is a pgbouncer in front of a [Server], stopped when the test ends.
type Bouncer struct {
	port int
}

// Addr is pgbouncer's HOST:PORT.
func (b *Bouncer) Addr() string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(b.port)) }

// URL returns a postgres:// URL for database db through pgbouncer.
func (b *Bouncer) URL(db string) string {
	return fmt.Sprintf("postgres://postgres@%s/%s?sslmode=disable", b.Addr(), db)
}

// StartPgBouncer starts pgbouncer on a free port in front of s, with trust
// authentication for the postgres user. The test is skipped when the
// pgbouncer binary is not installed (Debian package pgbouncer).
func (s *Server) StartPgBouncer(cfg BouncerConfig) *Bouncer {
	s.tb.Helper()
	bin, err := exec.LookPath("pgbouncer")
	if err != nil {
		for _, p := range []string{"/usr/sbin/pgbouncer", "/usr/bin/pgbouncer"} {
			if _, serr := os.Stat(p); serr == nil {
				bin, err = p, nil
				break
			}
		}
	}
	if err != nil {
		s.tb.Skip("pgtemp: pgbouncer is not installed (apt-get install pgbouncer)")
	}
	if cfg.PoolMode == "" {
		cfg.PoolMode = "transaction"
	}
	if cfg.DefaultPoolSize == 0 {
		cfg.DefaultPoolSize = 20
	}
	if cfg.IgnoreStartupParameters == "" {
		cfg.IgnoreStartupParameters = "extra_float_digits,lock_timeout,statement_timeout,idle_in_transaction_session_timeout"
	}
	dir := filepath.Join(filepath.Dir(s.dir), "pgbouncer")
	if err := os.Mkdir(dir, 0o755); err != nil {
		s.tb.Fatalf("pgtemp: %v", err)
	}
	b := &Bouncer{port: FreePort(s.tb)}
	ini := strings.Join([]string{
		"[databases]",
		fmt.Sprintf("* = host=127.0.0.1 port=%d", s.port),
		"[pgbouncer]",
		"listen_addr = 127.0.0.1",
		fmt.Sprintf("listen_port = %d", b.port),
		"unix_socket_dir =",
		"auth_type = trust",
		"auth_file = " + filepath.Join(dir, "userlist.txt"),
		"pool_mode = " + cfg.PoolMode,
		fmt.Sprintf("default_pool_size = %d", cfg.DefaultPoolSize),
		"max_client_conn = 1000",
		"ignore_startup_parameters = " + cfg.IgnoreStartupParameters,
		"logfile = " + filepath.Join(dir, "pgbouncer.log"),
		"",
	}, "\n")
	for name, content := range map[string]string{"pgbouncer.ini": ini, "userlist.txt": `"postgres" ""` + "\n"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
			s.tb.Fatalf("pgtemp: %v", err)
		}
	}
	// pgbouncer refuses to run as root: -u makes it switch to the server's
	// user itself, so that the process started here is pgbouncer.
	args := []string{filepath.Join(dir, "pgbouncer.ini")}
	if s.asUser != "" {
		if err := chownTo(dir, s.asUser); err != nil {
			s.tb.Fatalf("pgtemp: %v", err)
		}
		args = append([]string{"-u", s.asUser}, args...)
	}
	cmd := exec.Command(bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		s.tb.Fatalf("pgtemp: start pgbouncer: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	s.tb.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.Dial("tcp", b.Addr())
		if err == nil {
			c.Close()
			return b
		}
		select {
		case <-exited:
			log, _ := os.ReadFile(filepath.Join(dir, "pgbouncer.log"))
			s.tb.Fatalf("pgtemp: pgbouncer exited: %s\n%s", out.String(), log)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.tb.Fatalf("pgtemp: pgbouncer does not listen on %s", b.Addr())
		}
	}
}

func chownTo(path, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(path, uid, gid)
}
