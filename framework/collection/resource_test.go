package collection_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

// The test resource of the engine's contract tests: invoices, a typed model
// with a child table (lines) and a creation hook writing invoice_events.

// InvoiceCommand is the body of PUT /v1/invoices/{id}.
type InvoiceCommand struct {
	Customer string        `json:"customer" validate:"required,max=64"`
	Lines    []LineCommand `json:"lines" validate:"required,min=1,max=50,dive"`
}

// LineCommand is one line of an invoice command.
type LineCommand struct {
	Text   string            `json:"text" validate:"required,max=100"`
	Amount framework.Integer `json:"amount" validate:"min=0"`
}

// Invoice is the invoices row.
type Invoice struct {
	collection.System
	Customer    string        `gorm:"not null;index:idx_invoices_customer,expression:tenant_id,priority:1;index:idx_invoices_customer,priority:2"`
	TotalAmount int64         `gorm:"not null"`
	Lines       []InvoiceLine `gorm:"foreignKey:TenantID,InvoiceID;references:TenantID,ID"`
}

// InvoiceLine is an invoice_lines row.
type InvoiceLine struct {
	TenantID  string    `gorm:"primaryKey"`
	InvoiceID uuid.UUID `gorm:"primaryKey;type:uuid"`
	Line      int       `gorm:"primaryKey;autoIncrement:false"`
	Text      string    `gorm:"not null"`
	Amount    int64     `gorm:"not null"`
}

// InvoiceEvent is a row written by the creation hook.
type InvoiceEvent struct {
	Seq       int64 `gorm:"primaryKey"`
	TenantID  string
	InvoiceID uuid.UUID `gorm:"type:uuid"`
	Payload   string
}

func invoiceModel(cmd *InvoiceCommand, m *Invoice) {
	m.Customer, m.TotalAmount = cmd.Customer, 0
	m.Lines = make([]InvoiceLine, len(cmd.Lines))
	for i, l := range cmd.Lines {
		m.Lines[i] = InvoiceLine{Line: i + 1, Text: l.Text, Amount: int64(l.Amount)}
		m.TotalAmount += int64(l.Amount)
	}
}

type invoiceView struct {
	ID       string        `json:"id"`
	Status   string        `json:"status"`
	Version  int64         `json:"version"`
	Customer string        `json:"customer"`
	Total    int64         `json:"total"`
	Lines    []LineCommand `json:"lines"`
	Created  time.Time     `json:"created_at"`
	Updated  time.Time     `json:"updated_at"`
}

func invoiceRender(m *Invoice) any {
	v := invoiceView{ID: m.ID.String(), Status: m.Status, Version: m.Version, Customer: m.Customer, Total: m.TotalAmount,
		Lines: make([]LineCommand, len(m.Lines)), Created: m.CreatedAt, Updated: m.UpdatedAt}
	for i, l := range m.Lines {
		v.Lines[i] = LineCommand{Text: l.Text, Amount: framework.Integer(l.Amount)}
	}
	return v
}

func invoiceResource(mode collection.Mode) collection.Resource[InvoiceCommand, Invoice] {
	return collection.Resource[InvoiceCommand, Invoice]{
		Name: "invoices", Mode: mode, InitialStatus: "draft",
		ModelFunc: invoiceModel, RenderFunc: invoiceRender,
		ReplaceGuardFunc: func(m *Invoice) error {
			if m.Status != "draft" {
				return framework.Errorf(wire.CodeResourceLocked, "invoice is %s", m.Status)
			}
			return nil
		},
		OnCreateFunc: func(ctx context.Context, tx *gorm.DB, c collection.Change[Invoice]) error {
			return tx.WithContext(ctx).Create(&InvoiceEvent{TenantID: c.Model.TenantID, InvoiceID: c.Model.ID, Payload: string(c.Representation)}).Error
		},
		Children: []collection.Preload{{Field: "Lines", OrderBy: "line"}},
		Filters:  []string{"status", "customer"},
	}
}

// harness is the invoices resource on a fresh database behind a real HTTP
// server, with tenants t1 (token tok1) and t2 (tok2).
type harness struct {
	t   *testing.T
	db  *store.DB
	col *collection.Collection[InvoiceCommand, Invoice]
	srv *httptest.Server
	// engine is the engine col is built on.
	engine *framework.Engine
}

// legacy mounts h's collection's legacy POST route (POST /v1/invoices
// with an Idempotency-Key, tok1 for tenant t1) on a server of its own,
// closed with the test, and returns a harness that sends to it.
func (h *harness) legacy() *harness {
	h.t.Helper()
	router := gin.New()
	auth, err := server.NewStaticTokens(map[string]string{"tok1": "t1"})
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.col.MountLegacyPOST(router.Group("/v1", server.RequireAuth(auth, nil)),
		collection.LegacyConfig{DeprecatedSince: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		h.t.Fatal(err)
	}
	srv := httptest.NewServer(router)
	h.t.Cleanup(srv.Close)
	return &harness{t: h.t, db: h.db, col: h.col, srv: srv, engine: h.engine}
}

type setupOptions struct {
	mode collection.Mode
	// lockTimeout and statementTimeout are the store's Config's.
	lockTimeout, statementTimeout time.Duration
	// clockAhead sets the engine's clock that far ahead of the real time:
	// a process whose clock disagrees with the database's.
	clockAhead time.Duration
	logger     *slog.Logger
	// engine adjusts the engine's configuration.
	engine func(*framework.EngineConfig)
	// resource adjusts the invoices resource.
	resource func(*collection.Resource[InvoiceCommand, Invoice])
	// tp traces the store and, through [server.TraceRequests], the
	// requests.
	tp trace.TracerProvider
	// outbox creates the framework's tables (outbox_events and the rest).
	outbox bool
	// clockMaxAge is the store's Config.ClockMaxAge.
	clockMaxAge time.Duration
	// codes are registered on the engine before the collection is built.
	codes []wire.CodeInfo
	// own, when set, is the application's own gorm handle configuration:
	// the store is made with store.New on a *gorm.DB opened as an
	// application opens it (testdb.Gorm), not with store.Open.
	own *gorm.Config
}

// ownHandle makes the store on the application's own *gorm.DB, opened
// with gorm's defaults ([testdb.Gorm]).
func ownHandle(o *setupOptions) { o.own = &gorm.Config{} }

// patient lets a write wait a minute for a lock and for its statement: a
// storm of writes to one row queues on its lock, and how long the last
// one waits depends on the machine's speed, not on what a test checks.
func patient(o *setupOptions) { o.lockTimeout, o.statementTimeout = time.Minute, time.Minute }

func setup(t *testing.T, dsn string, opts ...func(*setupOptions)) *harness {
	t.Helper()
	o := setupOptions{mode: collection.CreateOrReplace}
	for _, f := range opts {
		f(&o)
	}
	cfg := store.Config{LockTimeout: o.lockTimeout, StatementTimeout: o.statementTimeout,
		TracerProvider: o.tp, ClockMaxAge: o.clockMaxAge}
	var db *store.DB
	var err error
	if o.own != nil {
		db, err = store.New(context.Background(), testdb.Gorm(t, dsn, o.own), cfg)
	} else {
		db, err = store.Open(context.Background(), dsn, cfg)
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if o.outbox {
		if err := migrations.Up(context.Background(), db); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Gorm.AutoMigrate(&Invoice{}, &InvoiceLine{}, &InvoiceEvent{}); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Now().Add(o.clockAhead) }
	ecfg := framework.EngineConfig{Now: now, Logger: o.logger}
	if o.engine != nil {
		o.engine(&ecfg)
	}
	engine, err := framework.NewEngine(db, ecfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := engine.RegisterCodes(o.codes...); err != nil {
		t.Fatal(err)
	}
	res := invoiceResource(o.mode)
	if o.resource != nil {
		o.resource(&res)
	}
	col, err := collection.New(engine, res)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := server.NewStaticTokens(map[string]string{"tok1": "t1", "tok2": "t2"})
	if err != nil {
		t.Fatal(err)
	}
	router := gin.New()
	if o.tp != nil {
		router.Use(server.TraceRequests("invoices", o.tp))
	}
	col.Mount(router.Group("/v1", server.RequireAuth(auth, nil)))
	srv := httptest.NewServer(router)
	t.Cleanup(srv.Close)
	return &harness{t: t, db: db, col: col, srv: srv, engine: engine}
}

type reply struct {
	Status int
	Header http.Header
	Body   []byte
}

func (r reply) code(t *testing.T) string {
	t.Helper()
	var p struct {
		Code string `json:"code"`
	}
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem body %q: %v", r.Body, err)
	}
	return p.Code
}

func (r reply) view(t *testing.T) invoiceView {
	t.Helper()
	var v invoiceView
	if err := json.Unmarshal(r.Body, &v); err != nil {
		t.Fatalf("representation %q: %v", r.Body, err)
	}
	return v
}

// do sends a request as token; headers are name, value pairs.
func (h *harness) do(method, path, token string, body []byte, headers ...string) reply {
	h.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, h.srv.URL+path, rd)
	if err != nil {
		h.t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := h.srv.Client().Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		h.t.Fatal(err)
	}
	return reply{Status: res.StatusCode, Header: res.Header, Body: b}
}

func (h *harness) count(table, where string, args ...any) int64 {
	h.t.Helper()
	var n int64
	if err := h.db.Gorm.Table(table).Where(where, args...).Count(&n).Error; err != nil {
		h.t.Fatal(err)
	}
	return n
}

// row reads the invoice row of t1 with its lines.
func (h *harness) row(id uuid.UUID) Invoice {
	h.t.Helper()
	var m Invoice
	if err := h.db.Gorm.Preload("Lines", func(db *gorm.DB) *gorm.DB { return db.Order("line") }).
		Where("tenant_id = ? AND id = ?", "t1", id).Take(&m).Error; err != nil {
		h.t.Fatalf("read invoice %s: %v", id, err)
	}
	return m
}

func invoiceBody(customer string, amounts ...int) []byte {
	var lines bytes.Buffer
	for i, a := range amounts {
		if i > 0 {
			lines.WriteByte(',')
		}
		fmt.Fprintf(&lines, `{"text":"line %d","amount":%d}`, i+1, a)
	}
	return fmt.Appendf(nil, `{"customer":%q,"lines":[%s]}`, customer, lines.String())
}

func invoicePath(id uuid.UUID) string { return "/v1/invoices/" + id.String() }

func wantStatus(t *testing.T, r reply, status int) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("status %d, want %d: %s", r.Status, status, r.Body)
	}
}
