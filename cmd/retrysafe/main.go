package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"os/user"
	"strings"
	"syscall"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storemysql"  // MariaDB (the MySQL family)
	_ "github.com/retrysafe/retrysafe/framework/store/storepg"     // PostgreSQL
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // SQLite
	"github.com/retrysafe/retrysafe/migrations"
)

// Exit codes: a script branches on these (docs/operator.md).
const (
	exitOK = 0
	// exitFailed: an unexpected failure (a database error mid-way).
	exitFailed = 1
	// exitUsage: a bad command, flag or argument; nothing was done.
	exitUsage = 2
	// exitUnavailable: the database cannot be reached, does not exist on
	// its server, or refuses the login (or a SQLite file does not exist);
	// nothing was done.
	exitUnavailable = 3
	// exitSchema: the framework's tables are missing or not migrated to
	// this version (run "retrysafe migrate up"); nothing was done.
	exitSchema = 4
	// exitNotFound: no such record or parked event.
	exitNotFound = 5
	// exitLeaseHeld: a live attempt holds the record's lease; retry after
	// it.
	exitLeaseHeld = 6
	// exitConflict: the record is not in a state the command may change
	// (already completed), or another attempt took it first.
	exitConflict = 7
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Getenv, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// exitError is an error with the exit code it ends the command with.
type exitError struct {
	code int
	err  error
	// printed: the message is on stderr already.
	printed bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageErr(format string, args ...any) error {
	return &exitError{code: exitUsage, err: fmt.Errorf(format, args...)}
}

// exitCode maps an error to its exit code: the one table of the command.
func exitCode(err error) int {
	var ee *exitError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ee):
		return ee.code
	case errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, store.ErrUnknownDSN), errors.Is(err, postkeys.ErrInvalidResolution):
		return exitUsage
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, store.ErrMisconfigured):
		return exitUnavailable
	case errors.Is(err, postkeys.ErrRecordNotFound), errors.Is(err, errEventNotParked):
		return exitNotFound
	case errors.Is(err, postkeys.ErrLeaseHeld), errors.Is(err, store.ErrLockTimeout):
		return exitLeaseHeld
	case errors.Is(err, postkeys.ErrNotResolvable), errors.Is(err, postkeys.ErrFenced):
		return exitConflict
	}
	return exitFailed
}

// cli is one invocation: its environment and its common flags.
type cli struct {
	getenv func(string) string
	// userName is the operating system's name for the user the command
	// runs as (osUserName).
	userName       func() (string, error)
	stdout, stderr io.Writer

	dsn            string
	json           bool
	connectTimeout time.Duration
	timeout        time.Duration
}

// command is one leaf subcommand.
type command struct {
	name  string
	usage string
	// flags declares the command's own flags on fs; it returns the
	// function that runs it once they are parsed (with the positional
	// arguments).
	flags func(c *cli, fs *flag.FlagSet) func(ctx context.Context, args []string) error
}

func commands() []command {
	return []command{
		{"records list", "[-tenant T] [-operation OP] [-state in_progress|unknown|completed] [-older-than 1h] [-limit N] [-show-keys]", recordsList},
		{"records show", "-tenant T -operation OP -key KEY", recordsShow},
		{"records resolve", "-tenant T -operation OP -key KEY -outcome succeeded -reference REF [-status 201] [-body JSON|@FILE] -reason WHY | -outcome failed -code CODE [-detail D] -reason WHY", recordsResolve},
		{"outbox list", "-parked [-limit N]", outboxList},
		{"outbox requeue", "ID... | -all", outboxRequeue},
		{"outbox stats", "", outboxStats},
		{"janitor run", "[-dry-run] [-batch N]", janitorRun},
		{"migrate status", "", migrateStatus},
		{"migrate up", "", migrateUp},
		{"openapi", "", openAPI},
	}
}

func run(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	return (&cli{getenv: getenv, userName: osUserName, stdout: stdout, stderr: stderr}).run(ctx, args)
}

// osUserName is the operating system's name for the user the command runs
// as.
func osUserName() (string, error) {
	u, err := user.Current()
	if err != nil {
		return "", err
	}
	return u.Username, nil
}

func (c *cli) run(ctx context.Context, args []string) int {
	err := c.dispatch(ctx, args)
	code := exitCode(err)
	var ee *exitError
	if err != nil && !errors.Is(err, flag.ErrHelp) && !(errors.As(err, &ee) && ee.printed) {
		fmt.Fprintln(c.stderr, "retrysafe:", err)
	}
	return code
}

func (c *cli) dispatch(ctx context.Context, args []string) error {
	for _, cmd := range commands() {
		words := strings.Fields(cmd.name)
		if len(args) < len(words) || strings.Join(args[:len(words)], " ") != cmd.name {
			continue
		}
		fs := flag.NewFlagSet("retrysafe "+cmd.name, flag.ContinueOnError)
		fs.SetOutput(c.stderr)
		fs.StringVar(&c.dsn, "db", "", `database: "sqlite:PATH", a postgres:// URL or a mysql:// URL (default $DATABASE_URL)`)
		fs.BoolVar(&c.json, "json", false, "print JSON for scripts instead of a table")
		fs.DurationVar(&c.connectTimeout, "connect-timeout", 5*time.Second, "time to open one database connection")
		fs.DurationVar(&c.timeout, "timeout", time.Minute, "time the whole command may take")
		runFn := cmd.flags(c, fs)
		fs.Usage = func() {
			fmt.Fprintf(c.stderr, "usage: retrysafe %s %s\n", cmd.name, cmd.usage)
			fs.PrintDefaults()
		}
		if err := fs.Parse(args[len(words):]); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return err
			}
			// The flag package has said what is wrong, with the usage.
			return &exitError{code: exitUsage, err: err, printed: true}
		}
		if c.timeout <= 0 {
			return usageErr("-timeout must be positive")
		}
		ctx, cancel := context.WithTimeout(ctx, c.timeout)
		defer cancel()
		return runFn(ctx, fs.Args())
	}
	c.usage()
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" || args[0] == "-help" {
		return flag.ErrHelp
	}
	return usageErr("unknown command %q", strings.Join(args, " "))
}

func (c *cli) usage() {
	fmt.Fprintln(c.stderr, "usage: retrysafe COMMAND [flags]   (every command takes -db DSN, -json, -timeout, -connect-timeout)")
	for _, cmd := range commands() {
		fmt.Fprintf(c.stderr, "  %-16s %s\n", cmd.name, cmd.usage)
	}
}

// open connects to the database, refusing a SQLite file that does not
// exist unless create (migrate up): the command never leaves an empty file
// behind. With migrated, it also refuses a database whose framework
// migrations are not all applied.
func (c *cli) open(ctx context.Context, create, migrated bool) (*store.DB, error) {
	dsn := c.dsn
	if dsn == "" {
		dsn = c.getenv("DATABASE_URL")
	}
	if dsn == "" {
		return nil, usageErr("no database: pass -db DSN or set DATABASE_URL")
	}
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok && !create {
		if _, err := os.Stat(path); err != nil {
			return nil, &exitError{code: exitUnavailable, err: fmt.Errorf("no SQLite database at %s: %w", path, err)}
		}
	}
	db, err := store.Open(ctx, dsn, store.Config{ConnectTimeout: c.connectTimeout, MaxOpenConns: 4,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("cannot open the database: %w", err)
	}
	if migrated {
		if err := checkMigrated(ctx, db); err != nil {
			_ = db.Close()
			return nil, err
		}
	}
	return db, nil
}

func checkMigrated(ctx context.Context, db *store.DB) error {
	status, err := migrations.Status(ctx, db)
	if err != nil {
		return db.Classify(err)
	}
	var pending []string
	for _, m := range status {
		if !m.Applied {
			pending = append(pending, m.Name)
		}
	}
	if len(pending) > 0 {
		return &exitError{code: exitSchema, err: fmt.Errorf("the framework's tables are not migrated (%d pending: %s): run retrysafe migrate up",
			len(pending), strings.Join(pending, ", "))}
	}
	return nil
}

// printJSON writes v as indented JSON.
func (c *cli) printJSON(v any) error {
	enc := json.NewEncoder(c.stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// bar is a progress bar on stderr when it is a terminal and the output is
// not JSON; a silent one otherwise.
func (c *cli) bar(total int64, what string) *progressbar.ProgressBar {
	f, ok := c.stderr.(*os.File)
	if c.json || !ok || !term.IsTerminal(int(f.Fd())) {
		return progressbar.DefaultSilent(total)
	}
	return progressbar.NewOptions64(total, progressbar.OptionSetWriter(c.stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionClearOnFinish(),
		progressbar.OptionThrottle(100*time.Millisecond))
}
