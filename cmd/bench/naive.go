package main

import (
	"context"
	"database/sql"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/glebarez/sqlite"
	"github.com/google/uuid"
	"gorm.io/driver/mysql"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"
)

// The naive baseline: what a team writes without retrysafe. A plain gin
// handler binds the same order body with gin's validator and inserts it
// with gorm's db.Create in gorm's default transaction, as typed rows (an
// order and its items, prices in cents), with no idempotency at all. It
// lives only in the bench, on the demo's connection pool, in tables of its
// own.

type naiveOrder struct {
	TenantID   string      `gorm:"column:tenant_id;primaryKey;size:64"`
	ID         string      `gorm:"column:id;primaryKey;size:36"`
	Status     string      `gorm:"column:status;not null"`
	Customer   string      `gorm:"column:customer;not null"`
	Currency   string      `gorm:"column:currency;not null"`
	Note       string      `gorm:"column:note;not null"`
	TotalCents int64       `gorm:"column:total_cents;not null"`
	Version    int64       `gorm:"column:version;not null"`
	CreatedAt  time.Time   `gorm:"column:created_at"`
	UpdatedAt  time.Time   `gorm:"column:updated_at"`
	Items      []naiveItem `gorm:"foreignKey:TenantID,OrderID;references:TenantID,ID"`
}

func (naiveOrder) TableName() string { return "bench_naive_orders" }

type naiveItem struct {
	TenantID       string `gorm:"column:tenant_id;primaryKey;size:64"`
	OrderID        string `gorm:"column:order_id;primaryKey;size:36"`
	Position       int    `gorm:"column:position;primaryKey"`
	SKU            string `gorm:"column:sku;not null"`
	Quantity       int64  `gorm:"column:quantity;not null"`
	UnitPriceCents int64  `gorm:"column:unit_price_cents;not null"`
}

func (naiveItem) TableName() string { return "bench_naive_order_items" }

// naiveCommand is the order body with gin's binding tags.
type naiveCommand struct {
	Customer string `json:"customer" binding:"required,max=64"`
	Currency string `json:"currency" binding:"required,iso4217"`
	Items    []struct {
		SKU       string `json:"sku" binding:"required,max=64"`
		Quantity  int64  `json:"quantity" binding:"min=1,max=10000"`
		UnitPrice string `json:"unit_price" binding:"required"`
	} `json:"items" binding:"required,min=1,max=100,dive"`
	Note string `json:"note" binding:"max=500"`
}

type naiveItemView struct {
	SKU       string `json:"sku"`
	Quantity  int64  `json:"quantity"`
	UnitPrice string `json:"unit_price"`
}

type naiveView struct {
	ID        string          `json:"id"`
	Status    string          `json:"status"`
	Customer  string          `json:"customer"`
	Currency  string          `json:"currency"`
	Items     []naiveItemView `json:"items"`
	Note      string          `json:"note,omitempty"`
	Total     string          `json:"total"`
	Version   int64           `json:"version"`
	CreatedAt time.Time       `json:"created_at"`
	UpdatedAt time.Time       `json:"updated_at"`
}

// newNaive opens gorm with its defaults (default transaction on, logger
// silent) on the demo's pool and creates the baseline's tables.
func newNaive(pool *sql.DB, dialect string) (*gin.Engine, *gorm.DB, error) {
	var dialector gorm.Dialector
	switch dialect {
	case "postgres":
		dialector = postgres.New(postgres.Config{Conn: pool})
	case "sqlite":
		dialector = sqlite.Dialector{Conn: pool}
	case "mysql":
		dialector = mysql.New(mysql.Config{Conn: pool})
	default:
		return nil, nil, errors.New("bench: unknown dialect " + dialect)
	}
	db, err := gorm.Open(dialector, &gorm.Config{Logger: logger.Discard})
	if err != nil {
		return nil, nil, err
	}
	if err := db.AutoMigrate(&naiveOrder{}, &naiveItem{}); err != nil {
		return nil, nil, err
	}
	r := gin.New()
	create := func(c *gin.Context, insert func(ctx context.Context, o *naiveOrder) error) {
		o, ok := bindNaive(c)
		if !ok {
			return
		}
		if err := insert(c.Request.Context(), &o); err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"error": "insert failed"})
			return
		}
		c.Header("Location", "/naive/orders/"+o.ID)
		c.JSON(http.StatusCreated, o.view())
	}
	createOrder := func(c *gin.Context) {
		create(c, func(ctx context.Context, o *naiveOrder) error { return db.WithContext(ctx).Create(o).Error })
	}
	r.POST("/naive/orders", createOrder)
	if err := mountBaselines(r, db, dialect, create, createOrder); err != nil {
		return nil, nil, err
	}
	r.GET("/naive/orders/:id", func(c *gin.Context) {
		var o naiveOrder
		err := db.WithContext(c.Request.Context()).Preload("Items").
			Where("tenant_id = ? AND id = ?", "acme", c.Param("id")).Take(&o).Error
		switch {
		case errors.Is(err, gorm.ErrRecordNotFound):
			c.JSON(http.StatusNotFound, gin.H{"error": "not found"})
		case err != nil:
			c.JSON(http.StatusInternalServerError, gin.H{"error": "read failed"})
		default:
			c.JSON(http.StatusOK, o.view())
		}
	})
	return r, db, nil
}

// bindNaive binds and checks the order body as the naive handler does; it
// answers 400 itself when the body is bad.
func bindNaive(c *gin.Context) (naiveOrder, bool) {
	var cmd naiveCommand
	if err := c.ShouldBindJSON(&cmd); err != nil {
		c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
		return naiveOrder{}, false
	}
	now := time.Now().UTC()
	o := naiveOrder{TenantID: "acme", ID: uuid.NewString(), Status: "draft", Customer: cmd.Customer,
		Currency: cmd.Currency, Note: cmd.Note, Version: 1, CreatedAt: now, UpdatedAt: now}
	for i, it := range cmd.Items {
		cents, ok := parseCents(it.UnitPrice)
		if !ok {
			c.JSON(http.StatusBadRequest, gin.H{"error": "bad unit_price"})
			return naiveOrder{}, false
		}
		o.TotalCents += cents * it.Quantity
		o.Items = append(o.Items, naiveItem{Position: i, SKU: it.SKU, Quantity: it.Quantity, UnitPriceCents: cents})
	}
	return o, true
}

func (o *naiveOrder) view() naiveView {
	v := naiveView{ID: o.ID, Status: o.Status, Customer: o.Customer, Currency: o.Currency, Note: o.Note,
		Total: formatCents(o.TotalCents), Version: o.Version, CreatedAt: o.CreatedAt, UpdatedAt: o.UpdatedAt}
	for _, it := range o.Items {
		v.Items = append(v.Items, naiveItemView{SKU: it.SKU, Quantity: it.Quantity, UnitPrice: formatCents(it.UnitPriceCents)})
	}
	return v
}

func parseCents(price string) (int64, bool) {
	whole, frac, _ := strings.Cut(price, ".")
	if len(frac) > 2 {
		return 0, false
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w < 0 {
		return 0, false
	}
	f, err := strconv.ParseInt((frac + "00")[:2], 10, 64)
	if err != nil {
		return 0, false
	}
	return w*100 + f, true
}

func formatCents(c int64) string {
	return strconv.FormatInt(c/100, 10) + "." + strconv.FormatInt(c%100/10, 10) + strconv.FormatInt(c%10, 10)
}
