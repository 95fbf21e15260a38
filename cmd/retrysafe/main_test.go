package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/payments"
	"github.com/retrysafe/retrysafe/wire"
)

func TestMain(m *testing.M) {
	gin.SetMode(gin.TestMode)
	os.Exit(m.Run())
}

// result is one run of the command.
type result struct {
	code           int
	stdout, stderr string
}

func runCmd(t *testing.T, env map[string]string, args ...string) result {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, func(k string) string { return env[k] }, &stdout, &stderr)
	return result{code, stdout.String(), stderr.String()}
}

func (r result) want(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit %d, want %d; stdout %q stderr %q", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// demo is the demo API on dsn behind an HTTP server, its workers not
// started: a payment whose provider answer is lost stays unknown.
type demo struct {
	t   *testing.T
	app *app.App
	srv *httptest.Server
	// seen are the sandbox charges unknownPayment has returned.
	seen map[string]bool
}

func newDemo(t *testing.T, dsn string) *demo {
	t.Helper()
	// A lost answer ends after 100 ms; a charge a loaded machine writes
	// slowly still answers.
	a, err := app.New(context.Background(), app.Config{DSN: dsn, ProviderTimeout: time.Minute,
		SandboxMaxHang: 100 * time.Millisecond, RequestDeadline: 2 * time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() { srv.Close(); _ = a.Close() })
	// What the demo's Start does first: the command reads its operations'
	// codes from there.
	if err := a.PostKeys.PublishOperations(context.Background()); err != nil {
		t.Fatal(err)
	}
	return &demo{t: t, app: a, srv: srv, seen: map[string]bool{}}
}

type response struct {
	status int
	header http.Header
	body   []byte
}

const paymentBody = `{"amount":4200,"currency":"usd","customer":"cus_8812","description":"Order 1042","payment_method":"pm_card_timeout_after_charge"}`

func (d *demo) pay(key string) response {
	d.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, d.srv.URL+"/v1/payments", strings.NewReader(paymentBody))
	req.Header.Set("Authorization", "Bearer sk_test_acme")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	res, err := d.srv.Client().Do(req)
	if err != nil {
		d.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return response{res.StatusCode, res.Header, body}
}

func (d *demo) count(query string, args ...any) int64 {
	d.t.Helper()
	var n int64
	if err := d.app.DB.Gorm.Raw(query, args...).Scan(&n).Error; err != nil {
		d.t.Fatal(err)
	}
	return n
}

// unknownPayment leaves a payment unknown: the sandbox charged, its answer
// was lost. It returns the charge's ID.
func (d *demo) unknownPayment(key string) string {
	d.t.Helper()
	if r := d.pay(key); r.status != http.StatusConflict || !strings.Contains(string(r.body), "outcome_pending") {
		d.t.Fatalf("first answer %d %s", r.status, r.body)
	}
	var charges []string
	if err := d.app.DB.Gorm.Raw("SELECT id FROM sandbox_charges WHERE tenant_id = 'acme'").Scan(&charges).Error; err != nil {
		d.t.Fatal(err)
	}
	for _, id := range charges {
		if !d.seen[id] {
			d.seen[id] = true
			return id
		}
	}
	d.t.Fatalf("no new charge among %v", charges)
	return ""
}

// TestResolveUnknownPaymentEndToEnd: a payment whose provider answer was
// lost is unknown; the operator lists it (by key hash), shows it, resolves
// it with the charge found at the provider; the client's retry replays the
// operator's answer byte for byte, with no second charge, and the audit
// row says who and why.
func TestResolveUnknownPaymentEndToEnd(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		d := newDemo(t, dsn)
		charge := d.unknownPayment("k-lost")
		env := map[string]string{"DATABASE_URL": dsn, "USER": "alice"}

		var listed []recordJSON
		out := runCmd(t, env, "records", "list", "-state", "unknown", "-tenant", "acme", "-json").want(t, exitOK)
		if err := json.Unmarshal([]byte(out.stdout), &listed); err != nil || len(listed) != 1 {
			t.Fatalf("list %s: %v", out.stdout, err)
		}
		if listed[0].KeySHA256 != telemetry.KeyHash("k-lost") || listed[0].Key != "" || strings.Contains(out.stdout, "k-lost") {
			t.Fatalf("list shows %+v: want the key's hash only", listed[0])
		}
		if table := runCmd(t, env, "records", "list", "-show-keys").want(t, exitOK); !strings.Contains(table.stdout, "k-lost") {
			t.Fatalf("-show-keys table %q", table.stdout)
		}
		id := []string{"-tenant", "acme", "-operation", payments.Operation, "-key", "k-lost"}
		show := runCmd(t, env, append([]string{"records", "show", "-json"}, id...)...).want(t, exitOK)
		if !strings.Contains(show.stdout, `"state": "unknown"`) {
			t.Fatalf("show %s", show.stdout)
		}

		answer := fmt.Sprintf(`{"id":"pay_by_hand","status":"succeeded","amount":4200,"currency":"usd","provider_charge_id":%q}`, charge)
		// A bad flag, a missing reason: usage, and nothing changes.
		runCmd(t, env, append([]string{"records", "resolve", "-outcome", "succeeded", "-nope"}, id...)...).want(t, exitUsage)
		runCmd(t, env, append([]string{"records", "resolve", "-outcome", "succeeded", "-reference", charge}, id...)...).want(t, exitUsage)
		runCmd(t, env, append([]string{"records", "resolve", "-outcome", "failed", "-code", "validation_failed", "-reason", "x"}, id...)...).want(t, exitUsage)
		// A body every request would be refused for, a window shorter
		// than the lease: usage, and nothing changes.
		dup := runCmd(t, env, append([]string{"records", "resolve", "-outcome", "succeeded", "-reference", charge,
			"-body", `{"id":"pay_1","id":"pay_2"}`, "-reason", "x"}, id...)...).want(t, exitUsage)
		short := runCmd(t, env, append([]string{"records", "resolve", "-outcome", "succeeded", "-reference", charge,
			"-ttl", "1ms", "-reason", "x"}, id...)...).want(t, exitUsage)
		if !strings.Contains(dup.stderr, "malformed_json") || !strings.Contains(short.stderr, "lease") {
			t.Fatalf("refusals say %q and %q", dup.stderr, short.stderr)
		}
		if n := d.count("SELECT count(*) FROM idempotency_resolutions"); n != 0 {
			t.Fatalf("%d audit rows after refused resolutions", n)
		}
		runCmd(t, env, append([]string{"records", "resolve", "-outcome", "succeeded", "-reference", charge, "-status", "201",
			"-body", answer, "-reason", "INC-7: charge found at the provider"}, id...)...).want(t, exitOK)
		// Resolved: a second resolution is a conflict.
		runCmd(t, env, append([]string{"records", "resolve", "-outcome", "succeeded", "-reference", charge,
			"-reason", "again"}, id...)...).want(t, exitConflict)

		retry := d.pay("k-lost")
		if retry.status != http.StatusCreated || string(retry.body) != answer || retry.header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("retry %d %s %v, want the operator's answer replayed", retry.status, retry.body, retry.header)
		}
		if again := d.pay("k-lost"); !bytes.Equal(again.body, retry.body) {
			t.Fatalf("second retry %s", again.body)
		}
		if n := d.count("SELECT count(*) FROM sandbox_charges"); n != 1 {
			t.Fatalf("%d charges, want the one", n)
		}
		if n := d.count("SELECT count(*) FROM idempotency_resolutions WHERE actor = 'alice' AND reason = 'INC-7: charge found at the provider' AND key_hash = ? AND reference = ?",
			telemetry.KeyHash("k-lost"), charge); n != 1 {
			t.Fatalf("%d audit rows", n)
		}
		runCmd(t, env, "records", "show", "-tenant", "acme", "-operation", payments.Operation, "-key", "nope").want(t, exitNotFound)
	})
}

// TestResolveRacesTheDemosRecoveryWorker: the command's resolve and the
// demo's recovery worker go for the same unknown payment at once; exactly
// one wins, and the client's retry answers the winner's outcome.
func TestResolveRacesTheDemosRecoveryWorker(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		d := newDemo(t, dsn)
		env := map[string]string{"DATABASE_URL": dsn, "USER": "alice"}
		for i := range 4 {
			key := fmt.Sprintf("k-race-%d", i)
			charge := d.unknownPayment(key)
			start := make(chan struct{})
			var (
				wg      sync.WaitGroup
				resolve result
				wErr    error
				done    int
			)
			wg.Add(2)
			go func() {
				defer wg.Done()
				<-start
				s, err := d.app.PostKeys.RecoverOnce(context.Background())
				done, wErr = s.Completed, err
			}()
			go func() {
				defer wg.Done()
				<-start
				var stdout, stderr bytes.Buffer
				code := run(context.Background(), []string{"records", "resolve", "-tenant", "acme", "-operation", payments.Operation,
					"-key", key, "-outcome", "failed", "-code", "card_declined", "-reason", "race"}, func(k string) string { return env[k] }, &stdout, &stderr)
				resolve = result{code, stdout.String(), stderr.String()}
			}()
			close(start)
			wg.Wait()
			if wErr != nil {
				t.Fatal(wErr)
			}
			operatorWon := resolve.code == exitOK
			if operatorWon == (done == 1) {
				t.Fatalf("%s: resolve %+v, worker completed %d: want exactly one winner", key, resolve, done)
			}
			if !operatorWon && resolve.code != exitConflict && resolve.code != exitLeaseHeld {
				t.Fatalf("%s: the losing resolve exited %+v", key, resolve)
			}
			r := d.pay(key)
			if operatorWon && (r.status != http.StatusPaymentRequired || !strings.Contains(string(r.body), "card_declined")) ||
				!operatorWon && (r.status != http.StatusCreated || !strings.Contains(string(r.body), charge)) {
				t.Fatalf("%s: operator won %v, retry %d %s", key, operatorWon, r.status, r.body)
			}
		}
		if n := d.count("SELECT count(*) FROM sandbox_charges"); n != 4 {
			t.Fatalf("%d charges, want one per payment", n)
		}
	})
}

// mailService is another service on the demo's database: one phased
// operation, "mail.send", with a business code of its own.
func mailService(t *testing.T, db *store.DB) {
	t.Helper()
	metrics, err := telemetry.NewMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{Metrics: metrics})
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterCodes(wire.CodeInfo{Code: "mailbox_full", Status: http.StatusUnprocessableEntity, Title: "Mailbox full"}); err != nil {
		t.Fatal(err)
	}
	keys, err := postkeys.New(engine, postkeys.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fail := func(context.Context, *postkeys.Run[struct{}]) (postkeys.Response, error) {
		return postkeys.Response{}, errors.New("not in this test")
	}
	if _, err := postkeys.Register(keys, postkeys.Operation[struct{}]{Name: "mail.send", Mode: postkeys.Phased,
		RejectionCodes: []wire.Code{"mailbox_full"}, RunFunc: fail, ReconcileFunc: fail}); err != nil {
		t.Fatal(err)
	}
	if err := keys.PublishOperations(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// unknownRecord leaves a record of operation unknown, as an attempt that
// failed after its first phase does.
func unknownRecord(t *testing.T, db *store.DB, operation, key string) {
	t.Helper()
	records := db.Driver.Records()
	id := store.RecordKey{Tenant: "acme", Operation: operation, Key: key}
	err := db.Write(context.Background(), func(tx *gorm.DB) error {
		c, ok, err := records.Insert(context.Background(), tx, &store.RecordClaimParams{ID: id, Fingerprint: "v1:x",
			FingerprintVersion: 1, Point: postkeys.PointStarted, Lease: time.Minute, TTL: time.Hour})
		if err != nil || !ok {
			return fmt.Errorf("claim: %v, %w", ok, err)
		}
		if ok, err = records.MarkUnknown(context.Background(), tx, &store.RecordMarkUnknownParams{ID: id, Fence: c.Fence}); err != nil || !ok {
			return fmt.Errorf("mark unknown: %v, %w", ok, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestResolveWithTheOperationsOwnCodes: a failed resolution takes the
// codes the record's own operation declared, as its service published
// them (a code of a service the command has never heard of, rendered with
// that service's title), and the generic ones; it refuses a code another
// service registered, and a business code of an operation no service has
// published. A refusal writes nothing.
func TestResolveWithTheOperationsOwnCodes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		d := newDemo(t, dsn)
		mailService(t, d.app.DB)
		env := map[string]string{"DATABASE_URL": dsn, "USER": "alice"}
		resolve := func(operation, key, code string) result {
			return runCmd(t, env, "records", "resolve", "-tenant", "acme", "-operation", operation, "-key", key,
				"-outcome", "failed", "-code", code, "-reason", "INC-9")
		}
		unknownRecord(t, d.app.DB, "mail.send", "m1")
		unknownRecord(t, d.app.DB, "legacy.export", "x1")
		d.unknownPayment("p1")

		// Another service's code, a code of no operation: refused.
		for _, c := range []struct{ op, key, code string }{{"mail.send", "m1", "card_declined"}, {payments.Operation, "p1", "mailbox_full"},
			{"legacy.export", "x1", "card_declined"}, {"mail.send", "m1", "no_such_code"}} {
			r := resolve(c.op, c.key, c.code).want(t, exitUsage)
			if !strings.Contains(r.stderr, c.code) {
				t.Fatalf("%s with %s: %q", c.op, c.code, r.stderr)
			}
		}
		if n := d.count("SELECT count(*) FROM idempotency_resolutions"); n != 0 {
			t.Fatalf("%d audit rows after refused resolutions", n)
		}
		// The operation's own codes, and a generic one.
		resolve("mail.send", "m1", "mailbox_full").want(t, exitOK)
		resolve(payments.Operation, "p1", "card_declined").want(t, exitOK)
		resolve("legacy.export", "x1", string(wire.CodeNotFound)).want(t, exitOK)
		show := runCmd(t, env, "records", "show", "-json", "-tenant", "acme", "-operation", "mail.send", "-key", "m1").want(t, exitOK)
		var rec recordJSON
		if err := json.Unmarshal([]byte(show.stdout), &rec); err != nil || rec.Response == nil {
			t.Fatalf("show %s: %v", show.stdout, err)
		}
		if rec.Response.Status != http.StatusUnprocessableEntity || !strings.Contains(rec.Response.Body, `"title":"Mailbox full"`) ||
			!strings.Contains(rec.Response.Body, `"code":"mailbox_full"`) {
			t.Fatalf("stored answer %+v, want mail's own problem", rec.Response)
		}
	})
}

// TestResolveActorWithoutUSER: without -actor and $USER (a container), the
// audit row names the operating system's user; when that has no name
// either, the command says to pass -actor and changes nothing.
func TestResolveActorWithoutUSER(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t, "sqlite")
	d := newDemo(t, dsn)
	env := map[string]string{"DATABASE_URL": dsn}
	args := func(key string) []string {
		return []string{"records", "resolve", "-tenant", "acme", "-operation", payments.Operation, "-key", key,
			"-outcome", "failed", "-code", "card_declined", "-reason", "INC-10"}
	}
	d.unknownPayment("k1")
	d.unknownPayment("k2")

	var stdout, stderr bytes.Buffer
	nameless := &cli{getenv: func(k string) string { return env[k] }, stdout: &stdout, stderr: &stderr,
		userName: func() (string, error) { return "", errors.New("user: unknown userid 1000670000") }}
	if code := nameless.run(context.Background(), args("k1")); code != exitUsage || !strings.Contains(stderr.String(), "-actor") {
		t.Fatalf("no name at all: exit %d, %q", code, stderr.String())
	}
	if n := d.count("SELECT count(*) FROM idempotency_resolutions"); n != 0 {
		t.Fatalf("%d audit rows after a refused resolution", n)
	}

	name, err := osUserName()
	if err != nil {
		t.Skipf("this machine has no name for the test's user: %v", err)
	}
	runCmd(t, env, args("k1")...).want(t, exitOK)
	runCmd(t, env, append(args("k2"), "-actor", "bob")...).want(t, exitOK)
	if n := d.count("SELECT count(*) FROM idempotency_resolutions WHERE key_hash = ? AND actor = ?", telemetry.KeyHash("k1"), name); n != 1 {
		t.Fatalf("audit rows of k1 by %q: %d", name, n)
	}
	if n := d.count("SELECT count(*) FROM idempotency_resolutions WHERE key_hash = ? AND actor = 'bob'", telemetry.KeyHash("k2")); n != 1 {
		t.Fatalf("audit rows of k2 by bob: %d", n)
	}
}

// TestUnknownDatabaseIsUnreachable: a DSN whose database does not exist on
// its server exits 3, as an unreachable one does, on each server.
func TestUnknownDatabaseIsUnreachable(t *testing.T) {
	t.Parallel()
	for _, server := range testdb.Servers(t) {
		t.Run(server, func(t *testing.T) {
			u, err := url.Parse(testdb.New(t, server))
			if err != nil {
				t.Fatal(err)
			}
			u.Path = "/retrysafe_no_such_database"
			r := runCmd(t, nil, "records", "list", "-db", u.String(), "-connect-timeout", "5s").want(t, exitUnavailable)
			if !strings.Contains(r.stderr, "retrysafe_no_such_database") {
				t.Fatalf("stderr %q", r.stderr)
			}
		})
	}
}

// TestRefusesWithoutChange: an unreachable database, a missing SQLite file
// and a database without the framework's tables each end with their exit
// code, a clear message, and nothing created.
func TestRefusesWithoutChange(t *testing.T) {
	t.Parallel()
	missing := filepath.Join(t.TempDir(), "missing.db")
	r := runCmd(t, nil, "records", "list", "-db", "sqlite:"+missing).want(t, exitUnavailable)
	if _, err := os.Stat(missing); !errors.Is(err, os.ErrNotExist) || !strings.Contains(r.stderr, "no SQLite database") {
		t.Fatalf("a missing file: %v, %q", err, r.stderr)
	}
	r = runCmd(t, nil, "outbox", "stats", "-db", "postgres://postgres@127.0.0.1:1/none?sslmode=disable", "-connect-timeout", "1s").want(t, exitUnavailable)
	if !strings.Contains(r.stderr, "cannot open the database") {
		t.Fatalf("unreachable: %q", r.stderr)
	}
	runCmd(t, nil, "records", "list").want(t, exitUsage)
	runCmd(t, nil, "records", "list", "-state", "done", "-db", "sqlite:x").want(t, exitUsage)
	runCmd(t, nil, "records", "frob").want(t, exitUsage)
	runCmd(t, nil, "outbox", "requeue", "-db", "sqlite:x", "not-a-uuid").want(t, exitUsage)
	runCmd(t, nil, "-h").want(t, exitOK)

	testdb.Run(t, func(t *testing.T, dsn string) {
		if strings.HasPrefix(dsn, "sqlite:") {
			// testdb names a file it has not created yet.
			if err := os.WriteFile(strings.TrimPrefix(dsn, "sqlite:"), nil, 0o600); err != nil {
				t.Fatal(err)
			}
		}
		for _, args := range [][]string{{"records", "list"}, {"outbox", "stats"}, {"janitor", "run"},
			{"records", "resolve", "-tenant", "a", "-operation", "o", "-key", "k", "-outcome", "failed", "-code", "card_declined", "-reason", "r"}} {
			r := runCmd(t, nil, append(args, "-db", dsn)...).want(t, exitSchema)
			if !strings.Contains(r.stderr, "migrate up") {
				t.Fatalf("%v: %q", args, r.stderr)
			}
		}
		runCmd(t, nil, "migrate", "status", "-db", dsn).want(t, exitOK)
		db, err := store.Open(context.Background(), dsn, store.Config{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		query := "SELECT count(*) FROM information_schema.tables WHERE table_schema = current_schema()"
		switch db.Driver.Name() {
		case "sqlite":
			query = "SELECT count(*) FROM sqlite_master"
		case "mysql":
			query = "SELECT count(*) FROM information_schema.tables WHERE table_schema = DATABASE()"
		}
		var n int64
		if err := db.Gorm.Raw(query).Scan(&n).Error; err != nil || n != 0 {
			t.Fatalf("%d tables after refused commands (%v), want none", n, err)
		}
		runCmd(t, nil, "migrate", "up", "-db", dsn).want(t, exitOK)
		runCmd(t, nil, "records", "list", "-db", dsn).want(t, exitOK)
	})
}

// TestBinarySmoke builds the command and runs it as a script would:
// exit codes and -json output on stdout.
func TestBinarySmoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "retrysafe")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	dsn := "sqlite:" + filepath.Join(dir, "ops.db")
	exit := func(args ...string) (int, string) {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "DATABASE_URL="+dsn)
		out, err := cmd.Output()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		}
		if err != nil {
			t.Fatal(err)
		}
		return 0, string(out)
	}
	if code, _ := exit("records", "list"); code != exitUnavailable {
		t.Fatalf("records list on no file: exit %d", code)
	}
	if code, out := exit("migrate", "up", "-json"); code != 0 || !strings.Contains(out, "00004_idempotency_resolutions.sql") {
		t.Fatalf("migrate up: exit %d %s", code, out)
	}
	if code, out := exit("records", "list", "-json"); code != 0 || strings.TrimSpace(out) != "[]" {
		t.Fatalf("records list: exit %d %q", code, out)
	}
	if code, out := exit("outbox", "stats", "-json"); code != 0 || !strings.Contains(out, `"parked": 0`) {
		t.Fatalf("outbox stats: exit %d %q", code, out)
	}
	if code, out := exit("janitor", "run", "-dry-run", "-json"); code != 0 || !strings.Contains(out, `"expired": 0`) {
		t.Fatalf("janitor: exit %d %q", code, out)
	}
	if code, _ := exit("records", "list", "-limit", "x"); code != exitUsage {
		t.Fatalf("bad flag: exit %d", code)
	}
	if code, out := exit("openapi"); code != 0 || !strings.Contains(out, `"/v1/payments"`) {
		t.Fatalf("openapi: exit %d %.200s", code, out)
	}
}
