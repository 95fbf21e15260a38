package tests

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/internal/testlog"
)

// TestNoSecretsInLogs drives the demo through the failure paths whose logs
// carried raw values (a lock timeout, a database outage, an insert the
// database rejects, NUL in a path and a body) with every log line of the
// framework and of gorm captured at Debug, and then looks for the raw
// idempotency keys, the bearer tokens and the card number in them.
func TestNoSecretsInLogs(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		logs := &testlog.Buffer{}
		logger := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		postgres := strings.HasPrefix(dsn, "postgres")
		var proxy *tcpProxy
		appDSN := dsn
		if postgres {
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			proxy = startProxy(t, u.Host)
			u.Host = proxy.addr
			appDSN = u.String()
		}
		e := newEnv(t, appDSN, func(c *app.Config) {
			c.Logger = logger
			c.LockTimeout = 200 * time.Millisecond
		})
		suffix := uuid.NewString()[:8]
		const card = "4242424242424242"
		badToken := "sk_live_SECRET" + suffix
		keys := map[string]string{}
		key := func(name string) string {
			k := "rawkey-" + name + "-" + suffix
			keys[name] = k
			return k
		}
		payment := []byte(`{"amount":4200,"currency":"usd","customer":"cus_` + card + `","description":"card ` + card + `"}`)

		// A bad token is refused, and must not be logged either.
		wantStatus(t, e.do("POST", "/v1/payments", badToken, payment, "Idempotency-Key", key("unauth")), http.StatusUnauthorized)

		// Lock timeout: another transaction holds the lock every claim
		// needs, no key's: 503. On MariaDB, whose lock wait timeout does
		// not say which lock it waited for, a claim's wait counts as its
		// key's (store.KeyLocked): 409.
		holder := holdWriteLock(t, dsn)
		locked := http.StatusServiceUnavailable
		if strings.HasPrefix(dsn, storemysql.Scheme) {
			locked = http.StatusConflict
		}
		wantStatus(t, e.do("POST", "/v1/transfers", tokenAcme, transferBody("acc_a", "acc_b", 500, "EUR"), "Idempotency-Key", key("lock-transfer")), locked)
		wantStatus(t, e.do("POST", "/v1/payments", tokenAcme, payment, "Idempotency-Key", key("lock-payment")), locked)
		holder()

		// An insert the database rejects: a trigger refuses payments.
		rejectInserts(t, dsn, true)
		if r := e.do("POST", "/v1/payments", tokenAcme, payment, "Idempotency-Key", key("rejected")); r.Status < 500 {
			t.Fatalf("a payment the database rejects answered %d: %s", r.Status, r.Body)
		}
		rejectInserts(t, dsn, false)

		// NUL and invalid UTF-8 in a body and in a path.
		nul := []byte(`{"amount":4200,"currency":"usd","customer":"cus_\u0000` + card + `"}`)
		wantStatus(t, e.do("POST", "/v1/payments", tokenAcme, nul, "Idempotency-Key", key("nul")), http.StatusBadRequest)
		wantStatus(t, e.do("GET", "/v1/payments/pay_%00"+card, tokenAcme, nil), http.StatusBadRequest)

		// An outage: the connection to PostgreSQL is cut.
		if postgres {
			proxy.cut()
			wantStatus(t, e.do("POST", "/v1/payments", tokenAcme, payment, "Idempotency-Key", key("outage")), http.StatusServiceUnavailable)
			wantStatus(t, e.do("PUT", orderPath(uuid.New()), tokenAcme, orderBody(1, "1.00")), http.StatusServiceUnavailable)
			proxy.restore(t)
		}
		// And a success, whose transition events must not carry it either.
		wantStatus(t, e.do("POST", "/v1/payments", tokenAcme, payment, "Idempotency-Key", key("ok")), http.StatusCreated)

		out := logs.String()
		if !strings.Contains(out, `"level":"ERROR"`) && !strings.Contains(out, `"level":"WARN"`) {
			t.Fatalf("the failure paths logged no warning or error; the test saw nothing:\n%s", out)
		}
		for name, k := range keys {
			if strings.Contains(out, k) {
				t.Errorf("the raw idempotency key of %q is in the logs", name)
			}
		}
		for _, secret := range []string{tokenAcme, badToken, card} {
			if strings.Contains(out, secret) {
				t.Errorf("%q is in the logs", secret)
			}
		}
		if t.Failed() {
			t.Logf("logs:\n%s", out)
		}
	})
}

// holdWriteLock makes every write to idempotency_records wait: on
// PostgreSQL an open transaction holds the table in EXCLUSIVE mode, on
// SQLite one holds the database's write lock. The returned func releases it.
func holdWriteLock(t *testing.T, dsn string) func() {
	t.Helper()
	stmts := []string{"BEGIN IMMEDIATE", "INSERT INTO sandbox_charges SELECT * FROM sandbox_charges WHERE 1 = 0"}
	if strings.HasPrefix(dsn, "postgres") {
		stmts = []string{"BEGIN", "LOCK TABLE idempotency_records IN EXCLUSIVE MODE"}
	}
	if strings.HasPrefix(dsn, "mysql") {
		stmts = mysqlTableLocks("idempotency_records")
	}
	return holdLock(t, dsn, stmts)
}

// mysqlTableLocks begin a transaction that keeps every other one from
// inserting into the tables: a locking read of all their rows under
// REPEATABLE READ locks every gap of their primary keys, up to the last,
// so an insert waits (for innodb_lock_wait_timeout, where LOCK TABLES
// would make it wait for the metadata lock, past any lock timeout).
func mysqlTableLocks(tables ...string) []string {
	stmts := []string{"SET SESSION tx_isolation = 'REPEATABLE-READ'", "START TRANSACTION"}
	for _, table := range tables {
		stmts = append(stmts, "SELECT * FROM "+table+" FOR UPDATE")
	}
	return stmts
}

// holdLock runs stmts, which begin a transaction and take a lock, on a
// connection of its own and keeps the transaction open; the returned func
// rolls it back.
func holdLock(t *testing.T, dsn string, stmts []string) func() {
	t.Helper()
	ctx := context.Background()
	db, conn := rawConn(t, dsn)
	for _, s := range stmts {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	var once sync.Once
	release := func() {
		once.Do(func() {
			if _, err := conn.ExecContext(ctx, "ROLLBACK"); err != nil {
				t.Errorf("rollback: %v", err)
			}
			conn.Close()
			db.Close()
		})
	}
	// Released even when the test fails while holding it: the schema's
	// cleanup would wait for the lock for ever.
	t.Cleanup(release)
	return release
}

// rejectInserts installs (or removes) a trigger that makes the database
// refuse every new payment row.
func rejectInserts(t *testing.T, dsn string, on bool) {
	t.Helper()
	stmts := []string{"DROP TRIGGER IF EXISTS reject_payments"}
	if on {
		stmts = []string{"CREATE TRIGGER reject_payments BEFORE INSERT ON payments BEGIN SELECT RAISE(ABORT, 'payments are refused'); END"}
	}
	if strings.HasPrefix(dsn, "postgres") {
		stmts = []string{"DROP TRIGGER IF EXISTS reject_payments ON payments"}
		if on {
			stmts = []string{
				`CREATE OR REPLACE FUNCTION reject_payment() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN RAISE EXCEPTION 'payments are refused'; END $$`,
				"CREATE TRIGGER reject_payments BEFORE INSERT ON payments FOR EACH ROW EXECUTE FUNCTION reject_payment()",
			}
		}
	}
	if strings.HasPrefix(dsn, "mysql") && on {
		stmts = []string{"CREATE TRIGGER reject_payments BEFORE INSERT ON payments FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'payments are refused'"}
	}
	db, conn := rawConn(t, dsn)
	defer db.Close()
	defer conn.Close()
	for _, s := range stmts {
		if _, err := conn.ExecContext(context.Background(), s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

// rawConn opens one connection of the test's own to the database behind
// dsn, outside the app's pool.
func rawConn(t *testing.T, dsn string) (*sql.DB, *sql.Conn) {
	t.Helper()
	driver, source := "pgx", dsn
	if path, ok := strings.CutPrefix(dsn, "sqlite:"); ok {
		driver, source = "sqlite", "file:"+path+"?_pragma=busy_timeout(5000)"
	}
	var db *sql.DB
	var err error
	if strings.HasPrefix(dsn, storemysql.Scheme) {
		db, err = storemysql.OpenDB(dsn, 5*time.Second)
	} else {
		db, err = sql.Open(driver, source)
	}
	if err != nil {
		t.Fatal(err)
	}
	conn, err := db.Conn(context.Background())
	if err != nil {
		db.Close()
		t.Fatal(fmt.Errorf("connect: %w", err))
	}
	return db, conn
}
