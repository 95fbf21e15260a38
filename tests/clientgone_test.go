package tests

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// logRecords keeps every record logged through it.
type logRecords struct {
	mu      sync.Mutex
	records []slog.Record
}

func (l *logRecords) Enabled(context.Context, slog.Level) bool { return true }

func (l *logRecords) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.records = append(l.records, r.Clone())
	return nil
}

func (l *logRecords) WithAttrs([]slog.Attr) slog.Handler { return l }
func (l *logRecords) WithGroup(string) slog.Handler      { return l }

// take returns the records logged since the last call and forgets them.
func (l *logRecords) take() []slog.Record {
	l.mu.Lock()
	defer l.mu.Unlock()
	r := l.records
	l.records = nil
	return r
}

// render is one record as a line of text, for failure messages and
// substring checks.
func render(r slog.Record) string {
	var b strings.Builder
	b.WriteString(r.Level.String() + " " + r.Message)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(" " + a.String())
		return true
	})
	return b.String()
}

// observedHandler tells the test when a request has arrived with its whole
// body (it reads the body first and hands it on), and when the handler
// has returned.
type observedHandler struct {
	next    http.Handler
	arrived chan struct{}
	done    chan struct{}
}

func (h *observedHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	defer close(h.done)
	body, err := io.ReadAll(r.Body)
	if err != nil {
		close(h.arrived)
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	close(h.arrived)
	h.next.ServeHTTP(w, r)
}

// TestClientGoneIsNotAServerError holds the locks a PUT, a POST and (on
// PostgreSQL) a GET wait for, lets each request reach the database and
// cancels it on the client side. The server must count it as
// outcome="client_gone" (not "error"), log it at Info with nothing logged
// at Warn or above, and leave no transaction open: afterwards writes
// succeed, and PostgreSQL shows none of the app's sessions idle in a
// transaction.
func TestClientGoneIsNotAServerError(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		postgres := strings.HasPrefix(dsn, "postgres")
		appDSN := dsn
		appName := "clientgone_" + uuid.NewString()[:8]
		if postgres {
			u, err := url.Parse(dsn)
			if err != nil {
				t.Fatal(err)
			}
			q := u.Query()
			q.Set("application_name", appName)
			u.RawQuery = q.Encode()
			appDSN = u.String()
		}
		logs := &logRecords{}
		a, err := app.New(context.Background(), app.Config{DSN: appDSN, Logger: slog.New(logs),
			// Far longer than the test: only the client ends the wait.
			LockTimeout: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = a.Close() })
		admin := func() *sql.Conn { _, c := rawConn(t, dsn); return c }
		var watch *sql.Conn
		if postgres {
			watch = admin()
			t.Cleanup(func() { _ = watch.Close() })
		}
		sessions := func(where string) int {
			t.Helper()
			var n int
			if err := watch.QueryRowContext(context.Background(),
				"SELECT count(*) FROM pg_stat_activity WHERE application_name = $1 AND "+where, appName).Scan(&n); err != nil {
				t.Fatal(err)
			}
			return n
		}

		cases := []struct {
			name, method, path, pattern, operation string
			body                                   []byte
			headers                                []string
			postgresOnly                           bool
		}{
			{name: "put", method: http.MethodPut, path: orderPath(uuid.New()), pattern: "put", operation: "orders", body: orderBody(1, "1.00")},
			{name: "post", method: http.MethodPost, path: "/v1/transfers", pattern: "post", operation: "transfers",
				body: transferBody("acc_a", "acc_b", 100, "EUR"), headers: []string{"Idempotency-Key", "gone-" + uuid.NewString()}},
			// A read waits only for PostgreSQL's ACCESS EXCLUSIVE lock;
			// SQLite's readers never wait for its writer.
			{name: "get", method: http.MethodGet, path: orderPath(uuid.New()), postgresOnly: true},
		}
		for _, tc := range cases {
			if tc.postgresOnly && !postgres {
				continue
			}
			release := holdLocks(t, dsn)
			h := &observedHandler{next: a.Handler(), arrived: make(chan struct{}), done: make(chan struct{})}
			srv := httptest.NewServer(h)
			ctx, cancel := context.WithCancel(context.Background())
			req, err := http.NewRequestWithContext(ctx, tc.method, srv.URL+tc.path, bytes.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Authorization", "Bearer "+tokenAcme)
			req.Header.Set("Content-Type", "application/json")
			for i := 0; i+1 < len(tc.headers); i += 2 {
				req.Header.Set(tc.headers[i], tc.headers[i+1])
			}
			sent := make(chan error, 1)
			go func() {
				res, err := srv.Client().Do(req)
				if err == nil {
					res.Body.Close()
				}
				sent <- err
			}()
			<-h.arrived
			if postgres {
				// The request is waiting for the lock.
				for sessions("wait_event_type = 'Lock'") == 0 {
					time.Sleep(5 * time.Millisecond)
				}
			}
			cancel()
			if err := <-sent; !errors.Is(err, context.Canceled) {
				t.Fatalf("%s: client error %v, want context.Canceled", tc.name, err)
			}
			<-h.done
			srv.Close()
			release()

			for _, r := range logs.take() {
				if r.Level >= slog.LevelWarn {
					t.Errorf("%s: a request its client abandoned logged %s", tc.name, render(r))
				}
				if r.Message == "request failed" {
					t.Errorf("%s: logged as a failure: %s", tc.name, render(r))
				}
				if r.Message == "client gone" && r.Level != slog.LevelInfo {
					t.Errorf("%s: client gone logged at %s, want INFO", tc.name, r.Level)
				}
			}
			if tc.pattern != "" {
				requests := a.Engine.Metrics().Requests
				if n := testutil.ToFloat64(requests.WithLabelValues(tc.pattern, tc.operation, telemetry.OutcomeClientGone)); n != 1 {
					t.Errorf("%s: outcome client_gone counted %v times, want 1", tc.name, n)
				}
				if n := testutil.ToFloat64(requests.WithLabelValues(tc.pattern, tc.operation, telemetry.OutcomeError)); n != 0 {
					t.Errorf("%s: outcome error counted %v times, want 0", tc.name, n)
				}
			}
			if postgres {
				if n := sessions("state LIKE 'idle in transaction%'"); n != 0 {
					t.Errorf("%s: %d of the app's sessions are idle in a transaction", tc.name, n)
				}
			}
		}

		// Nothing was left holding a lock: writes go through.
		e := &env{t: t, app: a, srv: httptest.NewServer(a.Handler())}
		t.Cleanup(e.srv.Close)
		wantStatus(t, e.do(http.MethodPut, orderPath(uuid.New()), tokenAcme, orderBody(1, "1.00")), http.StatusCreated)
		wantStatus(t, e.transfer(tokenAcme, "after-"+uuid.NewString(), transferBody("acc_a", "acc_b", 100, "EUR")), http.StatusCreated)
	})
}

// holdLocks makes every request to orders and idempotency_records wait:
// on PostgreSQL an open transaction holds both tables in ACCESS EXCLUSIVE
// mode (reads wait too), on SQLite one holds the database's write lock.
// The returned func releases it.
func holdLocks(t *testing.T, dsn string) func() {
	t.Helper()
	stmts := []string{"BEGIN IMMEDIATE", "DELETE FROM orders WHERE 1 = 0"}
	if strings.HasPrefix(dsn, "postgres") {
		stmts = []string{"BEGIN", "LOCK TABLE orders, idempotency_records IN ACCESS EXCLUSIVE MODE"}
	}
	if strings.HasPrefix(dsn, "mysql") {
		stmts = mysqlTableLocks("orders", "idempotency_records")
	}
	return holdLock(t, dsn, stmts)
}
