package storepg_test

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storepg"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestClassifyPostgres is the classifier's decision table: every
// connection-class failure is an outage (503), lock waits are lock
// timeouts (a row's, or a table's: busy), unique violations and unstorable text are named, everything
// else is passed through (a bug: 500).
func TestClassifyPostgres(t *testing.T) {
	t.Parallel()
	refused := connectErr(t, "postgres://postgres@127.0.0.1:1/none?connect_timeout=2")
	pg := func(code string) error { return &pgconn.PgError{Severity: "FATAL", Code: code, Message: "m"} }
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"refused (real ConnectError)", refused, "unavailable"},
		{"refused, wrapped", fmt.Errorf("store: ping: %w", refused), "unavailable"},
		{"starting up 57P03", pg("57P03"), "unavailable"},
		{"admin shutdown 57P01", fmt.Errorf("exec: %w", pg("57P01")), "unavailable"},
		{"read-only transaction 25006 (a standby, a fenced primary)", pg("25006"), "unavailable"},
		{"crash shutdown 57P02", pg("57P02"), "unavailable"},
		{"too many connections 53300", pg("53300"), "unavailable"},
		{"connection failure 08006", pg("08006"), "unavailable"},
		{"statement timeout 57014", pg("57014"), "unavailable"},
		{"idle in transaction timeout 25P03", pg("25P03"), "unavailable"},
		{"context deadline", fmt.Errorf("query: %w", context.DeadlineExceeded), "unavailable"},
		{"connection reset", fmt.Errorf("read: %w", syscall.ECONNRESET), "unavailable"},
		{"unexpected EOF", io.ErrUnexpectedEOF, "unavailable"},
		{"sql.ErrConnDone", sql.ErrConnDone, "unavailable"},
		{"lock timeout 55P03 on a table", pg("55P03"), "busy"},
		{"lock timeout 55P03 on a row", &pgconn.PgError{Code: "55P03", Where: `while locking tuple (0,1) in relation "t"`}, "lock"},
		{"lock timeout 55P03 on a key being inserted", &pgconn.PgError{Code: "55P03", Where: `while inserting index tuple (0,3) in relation "t_pkey"`}, "lock"},
		{"deadlock 40P01", pg("40P01"), "rolled back"},
		{"serialization 40001", pg("40001"), "rolled back"},
		{"unique violation 23505", pg("23505"), "unique"},
		{"bad UTF-8 22021", pg("22021"), "text"},
		{"untranslatable 22P05", pg("22P05"), "text"},
		{"no SQLSTATE at all", pg(""), ""},
		{"plain error", errors.New("boom"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := outcome(storepg.Driver{}.Classify(tc.err)); got != tc.want {
				t.Fatalf("classify(%v) = %q, want %q", tc.err, got, tc.want)
			}
		})
	}
}

// TestClassifyRealRefusals gets PostgreSQL to refuse connections the ways
// it does in production, through real connections, and checks that each is
// an outage: a role over its connection limit (53300 while connecting) and
// a database that does not accept connections (55000 while connecting, as
// during a maintenance window).
func TestClassifyRealRefusals(t *testing.T) {
	t.Parallel()
	base := testdb.Postgres(t)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		t.Fatal(err)
	}
	// Registered first, so it runs after the cleanups below that use it
	// (a deferred Close ran before them and left the role and database).
	t.Cleanup(func() { _ = admin.Close() })
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "rs_refuse_" + hex.EncodeToString(b[:])
	mustExec := func(q string) {
		t.Helper()
		if _, err := admin.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	mustExec("CREATE ROLE " + name + " LOGIN CONNECTION LIMIT 0")
	t.Cleanup(func() { _, _ = admin.Exec("DROP ROLE IF EXISTS " + name) })
	mustExec("CREATE DATABASE " + name + " ALLOW_CONNECTIONS false")
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + name) })

	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	limited := *u
	limited.User = url.User(name)
	closedDB := *u
	closedDB.Path = "/" + name

	for _, tc := range []struct {
		name, dsn, code string
	}{
		{"role over its connection limit", limited.String(), "53300"},
		{"database not accepting connections", closedDB.String(), "55000"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := connectErr(t, tc.dsn)
			var pgErr *pgconn.PgError
			if !errors.As(err, &pgErr) || pgErr.Code != tc.code {
				t.Fatalf("connect = %v, want SQLSTATE %s", err, tc.code)
			}
			if got := outcome(storepg.Driver{}.Classify(err)); got != "unavailable" {
				t.Fatalf("classify(%v) = %q, want unavailable", err, got)
			}
			// The same through Open, as a service starting against it sees.
			_, err = store.Open(context.Background(), tc.dsn, store.Config{})
			if !errors.Is(err, store.ErrUnavailable) {
				t.Fatalf("Open = %v, want ErrUnavailable", err)
			}
		})
	}
}

func connectErr(t *testing.T, dsn string) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	conn, err := pgconn.Connect(ctx, dsn)
	if err == nil {
		_ = conn.Close(ctx)
		t.Fatalf("connecting to %s succeeded", dsn)
	}
	return err
}

func outcome(err error) string {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, store.ErrRolledBack) && errors.Is(err, store.ErrLockTimeout):
		return "rolled back"
	case errors.Is(err, store.ErrBusy) && errors.Is(err, store.ErrLockTimeout):
		return "busy"
	case errors.Is(err, store.ErrLockTimeout):
		return "lock"
	case errors.Is(err, store.ErrUniqueViolation):
		return "unique"
	case errors.Is(err, store.ErrUnstorableText):
		return "text"
	}
	return ""
}
