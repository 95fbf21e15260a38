package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"time"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
	"gorm.io/gorm"
)

// The like-for-like baselines, beside naive, each on the demo's pool:
//
//   - naive-outbox: the naive create plus an outbox row in the same gorm
//     transaction, drained by a plain polling relay (claim a batch, publish
//     to a no-op, delete): the work a PUT create does, hand-written.
//     Every database.
//   - floor (PostgreSQL): the order, its items and the outbox row sent as one
//     pgx batch, one round trip and one implicit transaction, with no ORM and
//     no checks: the limit a create can approach.
//   - naive-replay: the cheapest correct replay a hand-written middleware
//     does: SHA-256 of the raw body, one row (tenant, key) → (hash, status,
//     headers, body) read by primary key, the hash compared, the stored
//     bytes written. Every database.

// naiveOutboxRow is the naive outbox event.
type naiveOutboxRow struct {
	ID          int64     `gorm:"column:id;primaryKey;autoIncrement"`
	TenantID    string    `gorm:"column:tenant_id;not null"`
	Type        string    `gorm:"column:type;not null"`
	AggregateID string    `gorm:"column:aggregate_id;not null"`
	Payload     []byte    `gorm:"column:payload;not null"`
	CreatedAt   time.Time `gorm:"column:created_at;not null"`
}

func (naiveOutboxRow) TableName() string { return "bench_naive_outbox" }

// naiveReplayRow is what the naive idempotency middleware stores per key.
type naiveReplayRow struct {
	TenantID string `gorm:"column:tenant_id;primaryKey;size:64"`
	Key      string `gorm:"column:key;primaryKey;size:255"`
	Hash     []byte `gorm:"column:hash;not null"`
	Status   int    `gorm:"column:status;not null"`
	Headers  []byte `gorm:"column:headers;not null"`
	Body     []byte `gorm:"column:body;not null"`
}

func (naiveReplayRow) TableName() string { return "bench_naive_replays" }

// relayPoll is how long the naive relay first waits when the outbox is
// empty; each further empty poll doubles the wait up to relayIdleMax, so
// that an idle relay adds no commits to the other scenarios' figures
// (commits per request count the whole database's).
const (
	relayPoll    = 20 * time.Millisecond
	relayIdleMax = time.Second
)

func mountBaselines(r *gin.Engine, db *gorm.DB, dialect string,
	create func(*gin.Context, func(context.Context, *naiveOrder) error), createOrder gin.HandlerFunc) error {
	if err := db.AutoMigrate(&naiveOutboxRow{}, &naiveReplayRow{}); err != nil {
		return err
	}
	r.POST("/naive/outbox/orders", func(c *gin.Context) {
		create(c, func(ctx context.Context, o *naiveOrder) error {
			payload, err := json.Marshal(o.view())
			if err != nil {
				return err
			}
			return db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				if err := tx.Create(o).Error; err != nil {
					return err
				}
				return tx.Create(&naiveOutboxRow{TenantID: o.TenantID, Type: "order.created", AggregateID: o.ID,
					Payload: payload, CreatedAt: o.CreatedAt}).Error
			})
		})
	})
	r.POST("/naive/replay/orders", naiveIdempotency(db), createOrder)
	if dialect == "postgres" {
		sqlDB, err := db.DB()
		if err != nil {
			return err
		}
		r.POST("/naive/floor/orders", floorCreate(sqlDB))
	}
	return nil
}

// runNaiveRelay drains bench_naive_outbox until ctx ends, a batch per
// transaction (see drainNaiveOutbox): it publishes each event to nothing
// and deletes it, and a failed publish would roll the delete back.
func runNaiveRelay(ctx context.Context, db *gorm.DB, dialect string, log *slog.Logger) {
	wait := relayPoll
	for {
		n, err := drainNaiveOutbox(ctx, db, dialect)
		if err != nil && ctx.Err() == nil {
			log.Error("naive relay", "err", err)
		}
		if n > 0 && err == nil {
			wait = relayPoll
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, relayIdleMax)
	}
}

// drainNaiveOutbox is one batch of the naive relay; it returns how many
// events it published. On PostgreSQL and SQLite one statement claims and
// deletes the batch (skipping rows another relay holds, on PostgreSQL);
// the write comes first so that SQLite takes its write lock at once
// rather than upgrade a read. MariaDB's DELETE can neither skip locked
// rows nor take its rows from a subquery on its own table with a LIMIT,
// so there the batch is claimed FOR UPDATE SKIP LOCKED and deleted by ID,
// in a READ COMMITTED transaction: InnoDB's default, REPEATABLE READ,
// would lock the gap after the last row too, and hold the creates' new
// events back until the relay commits.
func drainNaiveOutbox(ctx context.Context, db *gorm.DB, dialect string) (int, error) {
	publish := func(naiveOutboxRow) error { return nil }
	var events []naiveOutboxRow
	var err error
	if dialect == "mysql" {
		err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			if err := tx.Raw("SELECT id, tenant_id, type, aggregate_id, payload, created_at FROM bench_naive_outbox ORDER BY id LIMIT 100 FOR UPDATE SKIP LOCKED").
				Scan(&events).Error; err != nil || len(events) == 0 {
				return err
			}
			ids := make([]int64, len(events))
			for i, ev := range events {
				ids[i] = ev.ID
			}
			if err := tx.Exec("DELETE FROM bench_naive_outbox WHERE id IN ?", ids).Error; err != nil {
				return err
			}
			return publishAll(events, publish)
		}, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	} else {
		batch := "SELECT id FROM bench_naive_outbox ORDER BY id LIMIT 100"
		if dialect == "postgres" {
			batch += " FOR UPDATE SKIP LOCKED"
		}
		err = db.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
			err := tx.Raw("DELETE FROM bench_naive_outbox WHERE id IN (" + batch + ") RETURNING id, tenant_id, type, aggregate_id, payload, created_at").
				Scan(&events).Error
			if err != nil {
				return err
			}
			return publishAll(events, publish)
		})
	}
	if err != nil {
		return 0, err
	}
	return len(events), nil
}

// publishAll publishes events in order and stops at the first failure.
func publishAll(events []naiveOutboxRow, publish func(naiveOutboxRow) error) error {
	for _, ev := range events {
		if err := publish(ev); err != nil {
			return err
		}
	}
	return nil
}

// naiveIdempotency is a hand-written Idempotency-Key middleware over gin
// and gorm: a replay reads one row by primary key and writes its bytes; a
// new key runs the handler and stores its answer after it.
func naiveIdempotency(db *gorm.DB) gin.HandlerFunc {
	return func(c *gin.Context) {
		key := c.GetHeader("Idempotency-Key")
		raw, err := io.ReadAll(c.Request.Body)
		if key == "" || err != nil {
			c.AbortWithStatusJSON(http.StatusBadRequest, gin.H{"error": "Idempotency-Key and a body are required"})
			return
		}
		sum := sha256.Sum256(raw)
		var row naiveReplayRow
		// A struct condition, so that gorm quotes key (a reserved word
		// in MySQL).
		err = db.WithContext(c.Request.Context()).Where(&naiveReplayRow{TenantID: "acme", Key: key}).Take(&row).Error
		switch {
		case err == nil && !bytes.Equal(row.Hash, sum[:]):
			c.AbortWithStatusJSON(http.StatusUnprocessableEntity, gin.H{"error": "key reused with another body"})
		case err == nil:
			var h http.Header
			if err := json.Unmarshal(row.Headers, &h); err != nil {
				c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "stored headers"})
				return
			}
			for k, v := range h {
				c.Writer.Header()[k] = v
			}
			c.Writer.Header().Set("Idempotent-Replayed", "true")
			c.Writer.WriteHeader(row.Status)
			_, _ = c.Writer.Write(row.Body)
			c.Abort()
		case errors.Is(err, gorm.ErrRecordNotFound):
			c.Request.Body = io.NopCloser(bytes.NewReader(raw))
			rec := &recordingWriter{ResponseWriter: c.Writer}
			c.Writer = rec
			c.Next()
			if c.Writer.Status() >= 500 {
				return
			}
			headers, _ := json.Marshal(map[string][]string{"Content-Type": c.Writer.Header().Values("Content-Type"),
				"Location": c.Writer.Header().Values("Location")})
			_ = db.WithContext(c.Request.Context()).Create(&naiveReplayRow{TenantID: "acme", Key: key, Hash: sum[:],
				Status: c.Writer.Status(), Headers: headers, Body: rec.body.Bytes()}).Error
		default:
			c.AbortWithStatusJSON(http.StatusInternalServerError, gin.H{"error": "read failed"})
		}
	}
}

// recordingWriter keeps a copy of the body written through it.
type recordingWriter struct {
	gin.ResponseWriter
	body bytes.Buffer
}

func (w *recordingWriter) Write(b []byte) (int, error) {
	w.body.Write(b)
	return w.ResponseWriter.Write(b)
}

// floorCreate decodes the order body with no checks and sends the order,
// its items and the outbox row to PostgreSQL as one pgx batch: one round
// trip, one implicit transaction.
func floorCreate(pool *sql.DB) gin.HandlerFunc {
	return func(c *gin.Context) {
		var cmd naiveCommand
		if err := json.NewDecoder(c.Request.Body).Decode(&cmd); err != nil {
			c.JSON(http.StatusBadRequest, gin.H{"error": err.Error()})
			return
		}
		ctx := c.Request.Context()
		id, now := uuid.NewString(), time.Now().UTC()
		var total int64
		cents := make([]int64, len(cmd.Items))
		for i, it := range cmd.Items {
			cents[i], _ = parseCents(it.UnitPrice)
			total += cents[i] * it.Quantity
		}
		b := &pgx.Batch{}
		b.Queue("INSERT INTO bench_naive_orders (tenant_id, id, status, customer, currency, note, total_cents, version, created_at, updated_at) VALUES ($1, $2, 'draft', $3, $4, $5, $6, 1, $7, $7)",
			"acme", id, cmd.Customer, cmd.Currency, cmd.Note, total, now)
		for i, it := range cmd.Items {
			b.Queue("INSERT INTO bench_naive_order_items (tenant_id, order_id, position, sku, quantity, unit_price_cents) VALUES ($1, $2, $3, $4, $5, $6)",
				"acme", id, i, it.SKU, it.Quantity, cents[i])
		}
		b.Queue("INSERT INTO bench_naive_outbox (tenant_id, type, aggregate_id, payload, created_at) VALUES ($1, 'order.created', $2, $3, $4)",
			"acme", id, []byte(`{"id":"`+id+`"}`), now)
		conn, err := pool.Conn(ctx)
		if err == nil {
			err = conn.Raw(func(dc any) error { return dc.(*stdlib.Conn).Conn().SendBatch(ctx, b).Close() })
			_ = conn.Close()
		}
		if err != nil {
			c.JSON(http.StatusInternalServerError, gin.H{"error": "insert failed"})
			return
		}
		c.Header("Location", "/naive/orders/"+id)
		c.JSON(http.StatusCreated, gin.H{"id": id, "total": formatCents(total)})
	}
}
