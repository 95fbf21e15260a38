package tests

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the admin connection

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// commitMeter counts the transactions committed in one PostgreSQL database
// of its own (pg_stat_database.xact_commit), so that parallel tests, which
// use schemas of the shared database, do not count. It reads through an
// admin connection to another database, so its own reads do not count
// either.
type commitMeter struct {
	tb    testing.TB
	admin *sql.DB
	name  string
	DSN   string
}

// newCommitMeter creates a database for the caller (dropped at the end) and
// skips without TEST_DATABASE_URL.
func newCommitMeter(tb testing.TB) *commitMeter {
	tb.Helper()
	base := testdb.Postgres(tb)
	admin, err := sql.Open("pgx", base)
	if err != nil {
		tb.Fatal(err)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "rs_commits_" + hex.EncodeToString(b[:])
	if _, err := admin.Exec("CREATE DATABASE " + name + " TEMPLATE template0"); err != nil {
		_ = admin.Close()
		tb.Fatalf("create database: %v", err)
	}
	tb.Cleanup(func() {
		defer admin.Close()
		if _, err := admin.Exec("DROP DATABASE " + name + " WITH (FORCE)"); err != nil {
			tb.Errorf("drop database %s: %v", name, err)
		}
	})
	u, err := url.Parse(base)
	if err != nil {
		tb.Fatal(err)
	}
	u.Path = "/" + name
	return &commitMeter{tb: tb, admin: admin, name: name, DSN: u.String()}
}

// quiet turns autovacuum off for the app's tables, so that no autovacuum
// worker commits in the database while it is measured.
func (m *commitMeter) quiet(a *app.App) {
	m.tb.Helper()
	var tables []string
	if err := a.DB.Gorm.Raw("SELECT tablename FROM pg_tables WHERE schemaname = current_schema()").Scan(&tables).Error; err != nil {
		m.tb.Fatal(err)
	}
	for _, table := range tables {
		if err := a.DB.Gorm.Exec("ALTER TABLE " + table + " SET (autovacuum_enabled = false)").Error; err != nil {
			m.tb.Fatal(err)
		}
	}
}

// commits returns the transactions committed in the database so far, less
// one per session: every backend commits one transaction of its own while
// it starts (PostgreSQL reads its catalogs), which no request caused.
// Backends report their counters asynchronously (at most every second, or
// when they exit), so it first closes the app's idle connections, waits for
// their backends to exit, then for the counters to settle.
func (m *commitMeter) commits(a *app.App) int64 {
	m.tb.Helper()
	pool := a.DB.SQL()
	pool.SetMaxIdleConns(0)
	defer pool.SetMaxIdleConns(20)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for {
		var backends int
		err := m.admin.QueryRowContext(ctx, `SELECT count(*) FROM pg_stat_activity
WHERE datname = $1 AND backend_type = 'client backend'`, m.name).Scan(&backends)
		if err != nil {
			m.tb.Fatal(err)
		}
		if backends == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	last, stable := int64(-1), 0
	for stable < 5 {
		var n int64
		if err := m.admin.QueryRowContext(ctx, "SELECT xact_commit - sessions FROM pg_stat_database WHERE datname = $1", m.name).Scan(&n); err != nil {
			m.tb.Fatal(err)
		}
		if n == last {
			stable++
		} else {
			last, stable = n, 0
		}
		time.Sleep(20 * time.Millisecond)
	}
	return last
}

// rollbacks returns the transactions rolled back in the database so far,
// once the counters settled as [commitMeter.commits] waits for them.
func (m *commitMeter) rollbacks(a *app.App) int64 {
	m.tb.Helper()
	m.commits(a)
	var n int64
	if err := m.admin.QueryRow("SELECT xact_rollback FROM pg_stat_database WHERE datname = $1", m.name).Scan(&n); err != nil {
		m.tb.Fatal(err)
	}
	return n
}

// perRequest sends n requests with send and fails unless they cost want
// commits each. Tolerance: four commits no request caused. pgx's
// database/sql driver pings a connection the first time it is reused (and
// after a second idle), and PostgreSQL counts even an empty query as a
// transaction: the pool reopened after commits() costs one or two; and pgx
// prepares a new connection's first BEGIN in a round trip of its own,
// ended by a Sync outside any transaction, which PostgreSQL counts too.
func (m *commitMeter) perRequest(a *app.App, what string, n, want int, send func(i int)) {
	m.tb.Helper()
	before := m.commits(a)
	for i := range n {
		send(i)
	}
	after := m.commits(a)
	perRequest := float64(after-before) / float64(n)
	m.tb.Logf("%s: %d commits for %d requests (%.3f per request)", what, after-before, n, perRequest)
	if perRequest > float64(want)+4.0/float64(n) {
		m.tb.Fatalf("%s: %.3f commits per request, want at most %d", what, perRequest, want)
	}
	if after-before < int64(want*n) {
		m.tb.Fatalf("%s: %d commits for %d requests: the counter did not see every request", what, after-before, n)
	}
}

// TestTransferCommitsOneWriteTransaction: a local-mode create reads the
// record first (an autocommit SELECT, which PostgreSQL counts) and then
// commits both balance moves, the transfer row and its completed record in
// one transaction; a replay is that one read and nothing else.
func TestTransferCommitsOneWriteTransaction(t *testing.T) {
	m := newCommitMeter(t)
	e := newEnv(t, m.DSN)
	m.quiet(e.app)
	wantStatus(t, e.transfer(tokenAcme, "warm-up", transferBody("acc_a", "acc_b", 1, "EUR")), http.StatusCreated)

	const n = 40
	check := func(what string, want int, send func(i int)) {
		t.Helper()
		m.perRequest(e.app, what, n, want, send)
	}
	check("create", 2, func(i int) {
		wantStatus(t, e.transfer(tokenAcme, fmt.Sprintf("c-%d", i), transferBody("acc_a", "acc_b", 1, "EUR")), http.StatusCreated)
	})
	check("replay", 1, func(i int) {
		r := e.transfer(tokenAcme, fmt.Sprintf("c-%d", i), transferBody("acc_a", "acc_b", 1, "EUR"))
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("not a replay: %v", r.Header)
		}
	})
	e.wantBalance(tokenAcme, "acc_b", n+1)
}
