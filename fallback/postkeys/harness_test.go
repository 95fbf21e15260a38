package postkeys_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/prometheus/client_golang/prometheus"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storetest"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/testclock"
	"github.com/retrysafe/retrysafe/internal/testlog"
	"github.com/retrysafe/retrysafe/migrations"
)

func init() { gin.SetMode(gin.TestMode) }

const (
	tokenA = "tok_a"
	tokenB = "tok_b"
	lease  = 30 * time.Second
)

// widgetCmd is the command of the test operations.
type widgetCmd struct {
	Name string `json:"name" validate:"required,max=64"`
	// Decline makes the phased operation answer a stored 402.
	Decline bool `json:"decline,omitempty"`
}

// widgets is a phased test operation: phase "widget_created" inserts a
// widget row (the business write), then the response is rendered from it.
// Hooks let a test stop or fail an attempt at chosen places.
type widgets struct {
	db         *store.DB
	runs       atomic.Int64
	reconciles atomic.Int64
	// provider counts the calls to the stand-in for another system, which
	// run makes after its phase and a lease renewal.
	provider atomic.Int64
	// hooks, set before requests are sent; each gets the attempt number.
	beforePhase  func(attempt int64) error
	afterPhase   func(attempt int64) error
	reconcileErr func() error
	// beforeProvider runs after the lease renewal, right before the call.
	beforeProvider func(attempt int64) error
	// claimInFirstPhase registers the operation with ClaimInFirstPhase.
	claimInFirstPhase bool
	// renewFor, when set, renews with Run.RenewFor(renewFor) instead of
	// Run.Renew.
	renewFor time.Duration
	// complete ends the run with Run.Complete at "widget_done", which
	// appends "!" to the widget's name in the same transaction.
	complete bool
	// records, when set, wraps the adapter's record statements (a spy).
	records func(store.Records) store.Records
	// failPoint, when set, is the fail point function of every request
	// (internal/failpoint).
	failPoint failpoint.Func
}

// render is the operation's RenderFunc: the body rebuilt from the widget row.
func (w *widgets) render(ctx context.Context, db *gorm.DB, rec store.RecordRow) ([]byte, error) {
	resp, err := w.response(ctx, rec.ID.Tenant, rec.ResourceRef)
	return resp.Body, err
}

type widget struct {
	ID   string `json:"id"`
	Name string `json:"name"`
}

func (w *widgets) response(ctx context.Context, tenant, ref string) (postkeys.Response, error) {
	return w.responseOn(ctx, w.db.Gorm, tenant, ref)
}

func (w *widgets) responseOn(ctx context.Context, db *gorm.DB, tenant, ref string) (postkeys.Response, error) {
	var rows []widget
	if err := db.WithContext(ctx).Raw("SELECT id, name FROM widgets WHERE tenant_id = ? AND id = ?", tenant, ref).
		Scan(&rows).Error; err != nil {
		return postkeys.Response{}, err
	}
	if len(rows) != 1 {
		return postkeys.Response{}, errors.New("widget not found")
	}
	resp, err := postkeys.JSON(http.StatusCreated, rows[0], ref)
	resp.Header = http.Header{"Location": {"/v1/widgets/" + ref}, "X-Not-Stored": {"1"}}
	return resp, err
}

func (w *widgets) run(ctx context.Context, run *postkeys.Run[widgetCmd]) (postkeys.Response, error) {
	w.runs.Add(1)
	cmd, _ := run.Command()
	if w.beforePhase != nil {
		if err := w.beforePhase(run.Attempt()); err != nil {
			return postkeys.Response{}, err
		}
	}
	if run.RecoveryPoint() == postkeys.PointStarted {
		id := "wd_" + uuid.NewString()
		err := run.Phase(ctx, "widget_created", func(tx *gorm.DB) (string, error) {
			return id, tx.Exec("INSERT INTO widgets (tenant_id, id, name) VALUES (?, ?, ?)", run.Tenant(), id, cmd.Name).Error
		})
		if err != nil {
			return postkeys.Response{}, err
		}
	}
	if w.afterPhase != nil {
		if err := w.afterPhase(run.Attempt()); err != nil {
			return postkeys.Response{}, err
		}
	}
	if run.RecoveryPoint() == "widget_done" {
		return w.response(ctx, run.Tenant(), run.ResourceRef())
	}
	renew := run.Renew
	if w.renewFor > 0 {
		renew = func(ctx context.Context) error { return run.RenewFor(ctx, w.renewFor) }
	}
	if err := renew(ctx); err != nil {
		return postkeys.Response{}, err
	}
	if w.beforeProvider != nil {
		if err := w.beforeProvider(run.Attempt()); err != nil {
			return postkeys.Response{}, err
		}
	}
	w.provider.Add(1)
	if w.complete {
		return run.Complete(ctx, "widget_done", func(tx *gorm.DB) (postkeys.Response, error) {
			// || is OR on MySQL: concatenation is CONCAT there.
			bang := "name || '!'"
			if tx.Dialector.Name() == "mysql" {
				bang = "CONCAT(name, '!')"
			}
			if err := tx.Exec("UPDATE widgets SET name = "+bang+" WHERE tenant_id = ? AND id = ?", run.Tenant(), run.ResourceRef()).Error; err != nil {
				return postkeys.Response{}, err
			}
			if cmd.Decline {
				return postkeys.Response{}, framework.Errorf(codeDeclined, "the widget was declined")
			}
			return w.responseOn(ctx, tx, run.Tenant(), run.ResourceRef())
		})
	}
	if cmd.Decline {
		return postkeys.Response{}, framework.Errorf(codeDeclined, "the widget was declined")
	}
	return w.response(ctx, run.Tenant(), run.ResourceRef())
}

// codeDeclined is the widgets' business rejection, registered on the
// harness's engine.
const codeDeclined wire.Code = "card_declined"

func (w *widgets) reconcile(ctx context.Context, run *postkeys.Run[widgetCmd]) (postkeys.Response, error) {
	w.reconciles.Add(1)
	if w.reconcileErr != nil {
		if err := w.reconcileErr(); err != nil {
			return postkeys.Response{}, err
		}
	}
	return w.response(ctx, run.Tenant(), run.ResourceRef())
}

// crashOnce is a fail point function that fails point the first time an
// attempt reaches it, as if the process were killed there, and lets every
// other point pass.
func crashOnce(point string) failpoint.Func {
	var crashes atomic.Int64
	return func(_ context.Context, _, at string) error {
		if at == point && crashes.Add(1) == 1 {
			return errors.New("kill -9")
		}
		return nil
	}
}

// counterCmd is the command of the local test operation.
type counterCmd struct {
	By int64 `json:"by" validate:"min=1"`
}

// harness is an adapter with a phased "widgets" and a local "counters"
// operation behind a real HTTP server.
type harness struct {
	t        *testing.T
	db       *store.DB
	engine   *framework.Engine
	keys     *postkeys.Adapter
	clock    *testclock.Clock
	widgets  *widgets
	registry *prometheus.Registry
	srv      *httptest.Server
	logs     *testlog.Buffer
	// v1 is the authenticated route group: a test mounts an operation of
	// its own there before it sends requests.
	v1 *gin.RouterGroup
}

// setup builds the harness on dsn; tweak may change the adapter's Config
// (and set hooks on h.widgets) before anything runs.
func setup(t *testing.T, dsn string, tweak func(*postkeys.Config, *widgets)) *harness {
	t.Helper()
	return setupWith(t, dsn, store.Config{LockTimeout: 2 * time.Second}, tweak)
}

// patient is the store's Config of a test whose verdict needs every
// request to get its usual answer however slowly the databases of a
// loaded machine answer: a minute for a lock and for a statement
// (PostgreSQL's statement_timeout and MariaDB's max_statement_time count
// lock waits too).
var patient = store.Config{LockTimeout: time.Minute, StatementTimeout: time.Minute}

// setupWith is setup on a store opened with storeCfg.
func setupWith(t *testing.T, dsn string, storeCfg store.Config, tweak func(*postkeys.Config, *widgets)) *harness {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, storeCfg)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return setupOn(t, db, tweak)
}

// setupOn builds the harness on the store db, as setup does.
func setupOn(t *testing.T, db *store.DB, tweak func(*postkeys.Config, *widgets)) *harness {
	t.Helper()
	ctx := context.Background()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations: %v", err)
	}
	for _, stmt := range []string{
		"CREATE TABLE widgets (tenant_id VARCHAR(255) NOT NULL, id VARCHAR(255) NOT NULL, name TEXT NOT NULL, PRIMARY KEY (tenant_id, id))",
		"CREATE TABLE counters (tenant_id VARCHAR(255) NOT NULL PRIMARY KEY, value BIGINT NOT NULL)",
	} {
		if err := db.Gorm.Exec(stmt).Error; err != nil {
			t.Fatalf("%s: %v", stmt, err)
		}
	}
	c := testclock.New(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	registry := prometheus.NewRegistry()
	metrics, err := telemetry.NewMetrics(registry)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	logger := slog.New(slog.NewJSONHandler(logs, nil))
	engine, err := framework.NewEngine(db, framework.EngineConfig{Now: c.Now, Metrics: metrics, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	w := &widgets{db: db}
	// The database clock of the records moves with c.
	storetest.ShiftRecordClock(t, db, c.Offset)
	cfg := postkeys.Config{LeaseDuration: lease, InProgressWait: 50 * time.Millisecond, PollInterval: 5 * time.Millisecond}
	if tweak != nil {
		tweak(&cfg, w)
	}
	keys, err := postkeys.New(engine, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if w.records != nil {
		postkeys.WrapRecords(keys, w.records)
	}
	t.Cleanup(keys.Stop)
	if err := engine.RegisterCodes(wire.CodeInfo{Code: codeDeclined, Status: http.StatusPaymentRequired, Title: "Card declined"}); err != nil {
		t.Fatal(err)
	}
	wep, err := postkeys.Register(keys, postkeys.Operation[widgetCmd]{
		Name: "widgets", Mode: postkeys.Phased, ClaimInFirstPhase: w.claimInFirstPhase,
		RejectionCodes: []wire.Code{codeDeclined},
		RunFunc:        w.run, ReconcileFunc: w.reconcile, RenderFunc: w.render,
	})
	if err != nil {
		t.Fatal(err)
	}
	cep, err := postkeys.Register(keys, postkeys.Operation[counterCmd]{
		Name: "counters", KeyPolicy: postkeys.KeyOptional,
		ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req postkeys.Request[counterCmd]) (postkeys.Response, error) {
			// gorm spells the upsert for the database (ON CONFLICT, or
			// MySQL's ON DUPLICATE KEY UPDATE).
			err := tx.Table("counters").Clauses(clause.OnConflict{Columns: []clause.Column{{Name: "tenant_id"}},
				DoUpdates: clause.Assignments(map[string]any{"value": gorm.Expr("counters.value + ?", req.Command.By)})}).
				Create(map[string]any{"tenant_id": req.Tenant, "value": req.Command.By}).Error
			if err != nil {
				return postkeys.Response{}, err
			}
			return postkeys.JSON(http.StatusOK, map[string]any{"by": req.Command.By, "at": req.Now}, "")
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.NewStaticTokens(map[string]string{tokenA: "a", tokenB: "b"})
	if err != nil {
		t.Fatal(err)
	}
	router := gin.New()
	v1 := router.Group("/v1", server.RequireAuth(auth, nil))
	v1.POST("/widgets", wep.Handle)
	v1.POST("/counters", cep.Handle)
	var handler http.Handler = router
	if w.failPoint != nil {
		handler = failpoint.Handler(router, w.failPoint)
	}
	srv := httptest.NewServer(handler)
	t.Cleanup(srv.Close)
	return &harness{t: t, db: db, engine: engine, keys: keys, clock: c, widgets: w, registry: registry, srv: srv, logs: logs, v1: v1}
}

type response struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r response) code(t *testing.T) string {
	t.Helper()
	var p struct{ Code string }
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body: %v: %s", err, r.Body)
	}
	return p.Code
}

// post sends a POST with key (none when empty). Safe from several goroutines.
func (h *harness) post(path, token, key string, body string) response {
	req, err := http.NewRequest(http.MethodPost, h.srv.URL+path, bytes.NewReader([]byte(body)))
	if err != nil {
		panic(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		panic(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// storedHeader is the header rec stores (postkeys keeps it as a JSON
// object).
func storedHeader(rec store.RecordRow) http.Header {
	var h http.Header
	if rec.ResponseHeaders != "" {
		if err := json.Unmarshal([]byte(rec.ResponseHeaders), &h); err != nil {
			panic(err)
		}
	}
	return h
}

func (h *harness) record(tenant, op, key string) store.RecordRow {
	h.t.Helper()
	rec, found, err := h.keys.Lookup(context.Background(), tenant, op, key)
	if err != nil || !found {
		h.t.Fatalf("record %s/%s/%s: found=%v err=%v", tenant, op, key, found, err)
	}
	return rec
}

func (h *harness) noRecord(tenant, op, key string) {
	h.t.Helper()
	if rec, found, err := h.keys.Lookup(context.Background(), tenant, op, key); err != nil || found {
		h.t.Fatalf("record %s/%s/%s: found=%v (%+v) err=%v, want none", tenant, op, key, found, rec, err)
	}
}

func (h *harness) count(query string, args ...any) int64 {
	h.t.Helper()
	var n int64
	if err := h.db.Gorm.Raw(query, args...).Scan(&n).Error; err != nil {
		h.t.Fatalf("%s: %v", query, err)
	}
	return n
}

func (h *harness) widgetsCount() int64 { return h.count("SELECT count(*) FROM widgets") }

func wantStatus(t *testing.T, r response, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status = %d, want %d; body %s", r.Status, status, r.Body)
	}
}

// wantReplay stops the test unless r repeats first byte for byte with the
// same stored headers and Idempotent-Replayed: true.
func wantReplay(t *testing.T, r, first response) {
	t.Helper()
	if r.Status != first.Status || !bytes.Equal(r.Body, first.Body) {
		t.Fatalf("replay differs:\n%d %s\nfirst %d %s", r.Status, r.Body, first.Status, first.Body)
	}
	if r.Header.Get("Idempotent-Replayed") != "true" {
		t.Fatalf("replay not marked Idempotent-Replayed: %v", r.Header)
	}
	for _, name := range []string{"Content-Type", "Location", "Idempotency-Key", "Etag"} {
		if r.Header.Get(name) != first.Header.Get(name) {
			t.Fatalf("replayed %s = %q, first %q", name, r.Header.Get(name), first.Header.Get(name))
		}
	}
}

// gauge reads a gauge of the adapter from the registry.
func (h *harness) gauge(name string) float64 {
	h.t.Helper()
	families, err := h.registry.Gather()
	if err != nil {
		h.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name {
			return f.GetMetric()[0].GetGauge().GetValue()
		}
	}
	h.t.Fatalf("no metric %s", name)
	return 0
}
