package orders

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
)

// Statuses of an order.
const (
	StatusDraft     = "draft"
	StatusSubmitted = "submitted"
)

// Item is one line of an order.
type Item struct {
	SKU      string `json:"sku" validate:"required,max=64"`
	Quantity int64  `json:"quantity" validate:"min=1,max=10000"`
	// UnitPrice is a non-negative decimal string with at most two fraction
	// digits; it is normalized to exactly two ("10.0" → "10.00").
	UnitPrice string `json:"unit_price" validate:"required"`
}

// Command is the body of PUT /v1/orders/{id}.
type Command struct {
	Customer string `json:"customer" validate:"required,max=64"`
	Currency string `json:"currency" validate:"required,iso4217"`
	Items    []Item `json:"items" validate:"required,min=1,max=100,dive"`
	Note     string `json:"note,omitempty" validate:"max=500"`
}

var priceRE = regexp.MustCompile(`^[0-9]{1,10}(\.[0-9]{1,2})?$`)

// Check implements [framework.Checker]: prices are decimal strings.
func (c *Command) Check() []wire.FieldError {
	var errs []wire.FieldError
	for i, it := range c.Items {
		if !priceRE.MatchString(it.UnitPrice) {
			errs = append(errs, wire.FieldError{
				Field:  fmt.Sprintf("items[%d].unit_price", i),
				Reason: "a non-negative decimal string with at most 2 fraction digits",
			})
		}
	}
	return errs
}

// Normalize implements [framework.Normalizer]: "10.0", "10" and "10.00" are
// one price, so they give one fingerprint.
func (c *Command) Normalize() {
	for i := range c.Items {
		c.Items[i].UnitPrice = formatCents(cents(c.Items[i].UnitPrice))
	}
}

// cents parses a checked price.
func cents(price string) int64 {
	whole, frac, _ := strings.Cut(price, ".")
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	return w*100 + f
}

func formatCents(c int64) string { return fmt.Sprintf("%d.%02d", c/100, c%100) }

// Order is the orders row: the engine's system columns and the order's
// typed business columns, with its items as child rows.
type Order struct {
	collection.System
	Customer   string      `gorm:"column:customer;not null"`
	Currency   string      `gorm:"column:currency;not null"`
	Note       string      `gorm:"column:note;not null"`
	TotalCents int64       `gorm:"column:total_cents;not null"`
	Items      []OrderItem `gorm:"foreignKey:TenantID,OrderID;references:TenantID,ID"`
}

// TableName implements gorm's tabler.
func (Order) TableName() string { return "orders" }

// OrderItem is an order_items row: one line of an order.
type OrderItem struct {
	TenantID       string    `gorm:"column:tenant_id;primaryKey"`
	OrderID        uuid.UUID `gorm:"column:order_id;primaryKey;type:uuid"`
	Position       int       `gorm:"column:position;primaryKey"`
	SKU            string    `gorm:"column:sku;not null"`
	Quantity       int64     `gorm:"column:quantity;not null"`
	UnitPriceCents int64     `gorm:"column:unit_price_cents;not null"`
}

// TableName implements gorm's tabler.
func (OrderItem) TableName() string { return "order_items" }

// toModel maps a validated, normalized command onto the order row.
func toModel(cmd *Command, o *Order) {
	o.Customer, o.Currency, o.Note = cmd.Customer, cmd.Currency, cmd.Note
	o.Items = make([]OrderItem, len(cmd.Items))
	o.TotalCents = 0
	for i, it := range cmd.Items {
		price := cents(it.UnitPrice)
		o.Items[i] = OrderItem{Position: i, SKU: it.SKU, Quantity: it.Quantity, UnitPriceCents: price}
		o.TotalCents += it.Quantity * price
	}
}

// Representation is an order on the wire.
type Representation struct {
	ID        string    `json:"id"`
	Status    string    `json:"status"`
	Customer  string    `json:"customer"`
	Currency  string    `json:"currency"`
	Items     []Item    `json:"items"`
	Note      string    `json:"note,omitempty"`
	Total     string    `json:"total"`
	Version   int64     `json:"version"`
	CreatedAt time.Time `json:"created_at"`
	UpdatedAt time.Time `json:"updated_at"`
}

// Render builds the representation of an order row: prices and the total
// as decimal strings with two fraction digits.
func Render(o *Order) any {
	items := make([]Item, len(o.Items))
	for i, it := range o.Items {
		items[i] = Item{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: formatCents(it.UnitPriceCents)}
	}
	return Representation{ID: o.ID.String(), Status: o.Status, Customer: o.Customer, Currency: o.Currency,
		Items: items, Note: o.Note, Total: formatCents(o.TotalCents), Version: o.Version,
		CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
}

// onCreate, onReplace and onStatus write the order's outbox events in the
// transaction of the change, only when it happened.
func onCreate(ctx context.Context, tx *gorm.DB, c collection.Change[Order]) error {
	return emit(ctx, tx, EventCreated, c)
}

func onReplace(ctx context.Context, tx *gorm.DB, c collection.Change[Order]) error {
	return emit(ctx, tx, EventReplaced, c)
}

func onStatus(ctx context.Context, tx *gorm.DB, c collection.Change[Order]) error {
	if c.Model.Status != StatusSubmitted {
		return nil
	}
	return emit(ctx, tx, EventSubmitted, c)
}

func replaceGuard(o *Order) error {
	if o.Status != StatusDraft {
		return framework.Errorf(wire.CodeResourceLocked, "the order is %s; only draft orders can be replaced", o.Status)
	}
	return nil
}

// Resource is the declaration of orders on the PUT engine.
func Resource() collection.Resource[Command, Order] {
	return collection.Resource[Command, Order]{
		Name:             "orders",
		Mode:             collection.CreateOrReplace,
		InitialStatus:    StatusDraft,
		ModelFunc:        toModel,
		RenderFunc:       Render,
		ReplaceGuardFunc: replaceGuard,
		OnCreateFunc:     onCreate,
		OnReplaceFunc:    onReplace,
		OnStatusFunc:     onStatus,
		Children:         []collection.Preload{{Field: "Items", OrderBy: "position"}},
		Filters:          []string{"status", "customer"},
	}
}

// Orders serves the orders resource.
type Orders struct {
	*collection.Collection[Command, Order]
	engine *framework.Engine
}

// New builds the orders collection on e.
func New(e *framework.Engine) (*Orders, error) {
	col, err := collection.New(e, Resource())
	if err != nil {
		return nil, err
	}
	return &Orders{Collection: col, engine: e}, nil
}

// Mount registers PUT/GET/DELETE /orders/:id, GET /orders and
// POST /orders/:id/submit (draft → submitted) on g.
func (o *Orders) Mount(g gin.IRouter) {
	o.Collection.Mount(g)
	g.POST("/orders/:id/submit", o.handleSubmit)
}

func (o *Orders) handleSubmit(c *gin.Context) {
	tenant, ok := server.Tenant(c, o.engine.Logger())
	if !ok {
		return
	}
	id, err := collection.ResourceID(c)
	if err != nil {
		framework.WriteProblem(c.Writer, c.Request, o.engine.Logger(), err)
		return
	}
	res, err := o.SetStatus(c.Request.Context(), tenant, id, StatusSubmitted)
	if err != nil {
		framework.WriteProblem(c.Writer, c.Request, o.engine.Logger(), err)
		return
	}
	framework.WriteReply(c.Writer, framework.Reply{Status: http.StatusOK, Body: res.Body, ETag: res.ETag})
}
