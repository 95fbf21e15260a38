package tests

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestANewKeyBehindAnotherLockIsNotInProgress: a request with a key no
// request has used waits for a lock that is not its key's (SQLite's
// database write lock, held by another connection's BEGIN IMMEDIATE; on
// PostgreSQL and MariaDB the rows of the accounts a transfer moves, and
// on PostgreSQL a table lock on orders) past the lock timeout. It is
// never told 409 request_in_progress, which says that its key is being
// executed: it is 503 unavailable with Retry-After, nothing of it is
// stored, and once the lock is released the key executes, once. A replace
// that waits for the row lock of its own resource, which another
// transaction holds, is the key's: 409 request_in_progress on PostgreSQL
// and MariaDB (on SQLite it too waits for the database's lock, 503).
func TestANewKeyBehindAnotherLockIsNotInProgress(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		sqlite := strings.HasPrefix(dsn, "sqlite:")
		postgres := strings.HasPrefix(dsn, "postgres")
		e := newEnv(t, dsn, func(c *app.Config) { c.LockTimeout = 200 * time.Millisecond })
		wantStatus(t, e.transfer(tokenAcme, "open-"+uuid.NewString(), transferBody("acc_a", "acc_b", 100, "EUR")), http.StatusCreated)
		order := uuid.New()
		wantStatus(t, e.do(http.MethodPut, orderPath(order), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)

		busy := func(what string, r response) {
			t.Helper()
			if r.Status != http.StatusServiceUnavailable || r.Code(t) != "unavailable" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("%s behind another lock: %d %s (Retry-After %q), want 503 unavailable with Retry-After",
					what, r.Status, r.Body, r.Header.Get("Retry-After"))
			}
		}

		// A transfer with a new key behind a lock on its accounts (on
		// SQLite, on the database).
		stmts := []string{"BEGIN IMMEDIATE", "UPDATE accounts SET balance = balance WHERE 1 = 0"}
		switch {
		case postgres:
			stmts = []string{"BEGIN", "SELECT * FROM accounts FOR UPDATE"}
		case !sqlite:
			stmts = []string{"START TRANSACTION", "SELECT * FROM accounts FOR UPDATE"}
		}
		release := holdLock(t, dsn, stmts)
		key := "new-" + uuid.NewString()
		body := transferBody("acc_a", "acc_b", 250, "EUR")
		busy("a transfer with a new key", e.transfer(tokenAcme, key, body))
		if n := e.count("idempotency_records", "idem_key = ?", key); n != 0 {
			t.Fatalf("the refused transfer left %d records", n)
		}
		if n := e.count("transfers", "amount = ?", 250); n != 0 {
			t.Fatalf("the refused transfer left %d transfers", n)
		}

		// A PUT of a new ID behind a lock on the database (SQLite) or on
		// the table (PostgreSQL), not on its row.
		id := uuid.New()
		if sqlite {
			busy("a PUT of a new ID", e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(2, "2.00")))
		}
		release()
		if postgres {
			release = holdLock(t, dsn, []string{"BEGIN", "LOCK TABLE orders IN SHARE MODE"})
			busy("a PUT of a new ID", e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(2, "2.00")))
			release()
		}
		if n := e.count("orders", "id = ?", id); n != 0 {
			t.Fatalf("the refused PUT left %d orders", n)
		}

		// Released: the key executes, once, and replays.
		first := e.transfer(tokenAcme, key, body)
		wantStatus(t, first, http.StatusCreated)
		wantReplay(t, e.transfer(tokenAcme, key, body), first)
		if n := e.count("transfers", "amount = ?", 250); n != 1 {
			t.Fatalf("the key executed %d times", n)
		}
		created := e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(2, "2.00"))
		wantStatus(t, created, http.StatusCreated)
		wantReplay(t, e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(2, "2.00")), created)

		// The key's own row, locked by another transaction: in progress.
		lockRow := []string{"BEGIN IMMEDIATE", "UPDATE orders SET version = version WHERE 1 = 0"}
		switch {
		case postgres:
			lockRow = []string{"BEGIN", "SELECT * FROM orders WHERE id = '" + order.String() + "' FOR UPDATE"}
		case !sqlite:
			lockRow = []string{"START TRANSACTION", "SELECT * FROM orders WHERE id = '" + order.String() + "' FOR UPDATE"}
		}
		release = holdLock(t, dsn, lockRow)
		wantBusy(t, dsn, e.do(http.MethodPut, orderPath(order), tokenAcme, orderBody(3, "3.00")))
		release()
		wantStatus(t, e.do(http.MethodPut, orderPath(order), tokenAcme, orderBody(3, "3.00")), http.StatusOK)
	})
}

// wantBusy checks the answer to a request that waited past the lock
// timeout for a lock its own key's request held: 409 request_in_progress
// with Retry-After, where the lock was the key's row's; on SQLite, whose
// one write lock tells nobody's key, 503 unavailable with Retry-After.
func wantBusy(t *testing.T, dsn string, r response) {
	t.Helper()
	status, code := http.StatusConflict, "request_in_progress"
	if strings.HasPrefix(dsn, "sqlite:") {
		status, code = http.StatusServiceUnavailable, "unavailable"
	}
	if r.Status != status || r.Code(t) != code || r.Header.Get("Retry-After") == "" {
		t.Fatalf("a request behind its key's lock: %d %v %s, want %d %s with Retry-After", r.Status, r.Header, r.Body, status, code)
	}
}
