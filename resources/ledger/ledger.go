package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/inbox"
	"github.com/retrysafe/retrysafe/framework/outbox"
)

// Consumer is the ledger's name in the inbox and its durable consumer's.
const Consumer = "ledger"

// EventPaymentSucceeded is the event the ledger consumes (the payments
// resource emits it; the two packages do not import each other).
const EventPaymentSucceeded = "payment.succeeded"

// Page sizes of GET /v1/ledger.
const (
	DefaultPageSize = 50
	MaxPageSize     = 100
)

// Entry is one ledger entry.
type Entry struct {
	ID        string    `json:"id"`
	PaymentID string    `json:"payment_id"`
	Amount    int64     `json:"amount"`
	Currency  string    `json:"currency"`
	EventID   string    `json:"event_id"`
	CreatedAt time.Time `json:"created_at"`
}

// Page is a page of entries, newest first.
type Page struct {
	Items      []Entry `json:"items"`
	NextCursor *string `json:"next_cursor"`
}

type entryRow struct {
	TenantID  string    `gorm:"column:tenant_id;primaryKey"`
	ID        string    `gorm:"column:id;primaryKey"`
	PaymentID string    `gorm:"column:payment_id"`
	Amount    int64     `gorm:"column:amount"`
	Currency  string    `gorm:"column:currency"`
	EventID   string    `gorm:"column:event_id"`
	CreatedAt time.Time `gorm:"column:created_at"`
}

func (entryRow) TableName() string { return "ledger_entries" }

// Ledger consumes payment events and serves the ledger.
type Ledger struct {
	engine *framework.Engine
	inbox  *inbox.Inbox
}

// New returns the ledger on e's database, deduplicating through in.
func New(e *framework.Engine, in *inbox.Inbox) (*Ledger, error) {
	if e == nil || in == nil {
		return nil, errors.New("ledger: New needs an engine and an inbox")
	}
	in.Duplicates(Consumer) // reported as 0 from the start
	return &Ledger{engine: e, inbox: in}, nil
}

// payment is the part of a payment.succeeded payload the ledger reads.
type payment struct {
	ID       string `json:"id"`
	Amount   int64  `json:"amount"`
	Currency string `json:"currency"`
}

// Handle applies one event: a payment.succeeded adds one entry, once per
// event ID; other events are ignored. An error means nothing was written.
func (l *Ledger) Handle(ctx context.Context, ev outbox.Event) error {
	if ev.Type != EventPaymentSucceeded {
		return nil
	}
	var p payment
	if err := json.Unmarshal(ev.Payload, &p); err != nil || p.ID == "" {
		return fmt.Errorf("ledger: event %s has no payment: %v", ev.ID, err)
	}
	_, err := l.inbox.Process(ctx, Consumer, ev.ID.String(), func(tx *gorm.DB) error {
		id, err := uuid.NewV7()
		if err != nil {
			return err
		}
		return tx.Create(&entryRow{TenantID: ev.Tenant, ID: "le_" + strings.ReplaceAll(id.String(), "-", ""),
			PaymentID: p.ID, Amount: p.Amount, Currency: p.Currency, EventID: ev.ID.String(),
			CreatedAt: l.engine.Now().UTC()}).Error
	})
	return err
}

// List returns a page of the tenant's entries, newest first, after cursor
// (the last ID of the previous page, "" for the first).
func (l *Ledger) List(ctx context.Context, tenant string, limit int, cursor string) (Page, error) {
	if limit < 1 || limit > MaxPageSize {
		limit = DefaultPageSize
	}
	q := l.engine.DB().Gorm.WithContext(ctx).Where("tenant_id = ?", tenant)
	if cursor != "" {
		q = q.Where("id < ?", cursor)
	}
	var rows []entryRow
	if err := q.Order("id DESC").Limit(limit + 1).Find(&rows).Error; err != nil {
		return Page{}, l.engine.DB().Classify(err)
	}
	page := Page{Items: make([]Entry, 0, min(len(rows), limit))}
	for i, r := range rows {
		if i == limit {
			next := rows[i-1].ID
			page.NextCursor = &next
			break
		}
		page.Items = append(page.Items, Entry{ID: r.ID, PaymentID: r.PaymentID, Amount: r.Amount,
			Currency: r.Currency, EventID: r.EventID, CreatedAt: r.CreatedAt.UTC()})
	}
	return page, nil
}

// Mount registers GET /ledger on g, which must already run
// [server.RequireAuth].
func (l *Ledger) Mount(g gin.IRouter) { g.GET("/ledger", l.handleList) }

func (l *Ledger) handleList(c *gin.Context) {
	tenant, ok := server.Tenant(c, l.engine.Logger())
	if !ok {
		return
	}
	limit := DefaultPageSize
	if s := c.Query("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > MaxPageSize {
			framework.WriteProblem(c.Writer, c.Request, l.engine.Logger(), &framework.Error{Code: wire.CodeValidationFailed,
				Detail: "limit must be an integer from 1 to " + strconv.Itoa(MaxPageSize),
				Fields: []wire.FieldError{{Field: "limit", Reason: "min=1,max=" + strconv.Itoa(MaxPageSize)}}})
			return
		}
		limit = n
	}
	cursor := c.Query("cursor")
	if cursor != "" && (!strings.HasPrefix(cursor, "le_") || len(cursor) != 35) {
		framework.WriteProblem(c.Writer, c.Request, l.engine.Logger(), &framework.Error{Code: wire.CodeValidationFailed,
			Detail: "cursor is not a ledger cursor", Fields: []wire.FieldError{{Field: "cursor", Reason: "a next_cursor value"}}})
		return
	}
	page, err := l.List(c.Request.Context(), tenant, limit, cursor)
	if err != nil {
		framework.WriteProblem(c.Writer, c.Request, l.engine.Logger(), err)
		return
	}
	body, err := json.Marshal(page)
	if err != nil {
		framework.WriteProblem(c.Writer, c.Request, l.engine.Logger(), err)
		return
	}
	framework.WriteReply(c.Writer, framework.Reply{Status: http.StatusOK, Body: body})
}
