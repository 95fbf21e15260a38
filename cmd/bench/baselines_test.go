package main

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func setupBaselines(t *testing.T, dsn string) (*gin.Engine, *gorm.DB, string) {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	gin.SetMode(gin.ReleaseMode)
	r, gdb, err := newNaive(db.SQL(), db.Driver.Name())
	if err != nil {
		t.Fatal(err)
	}
	return r, gdb, db.Driver.Name()
}

func postBaseline(r http.Handler, path, key string, body []byte) *httptest.ResponseRecorder {
	req := httptest.NewRequest(http.MethodPost, path, bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, req)
	return rec
}

func count(t *testing.T, db *gorm.DB, table string) int64 {
	t.Helper()
	var n int64
	if err := db.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// TestNaiveOutboxWritesAndDrains: each naive-outbox create commits its
// order, items and one outbox row; the relay publishes and deletes them.
func TestNaiveOutboxWritesAndDrains(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		r, db, dialect := setupBaselines(t, dsn)
		for range 3 {
			if rec := postBaseline(r, "/naive/outbox/orders", "", orderBody); rec.Code != http.StatusCreated {
				t.Fatalf("create: %d %s", rec.Code, rec.Body)
			}
		}
		if o, i, e := count(t, db, "bench_naive_orders"), count(t, db, "bench_naive_order_items"), count(t, db, "bench_naive_outbox"); o != 3 || i != 6 || e != 3 {
			t.Fatalf("%d orders, %d items, %d events; want 3, 6, 3", o, i, e)
		}
		n, err := drainNaiveOutbox(context.Background(), db, dialect)
		if err != nil || n != 3 || count(t, db, "bench_naive_outbox") != 0 {
			t.Fatalf("drain: %d events, %v; %d left", n, err, count(t, db, "bench_naive_outbox"))
		}
	})
}

// TestNaiveReplayAnswersStoredBytes: the naive middleware creates once per
// key, replays the stored answer byte for byte, and refuses the key with
// another body.
func TestNaiveReplayAnswersStoredBytes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		r, db, _ := setupBaselines(t, dsn)
		first := postBaseline(r, "/naive/replay/orders", "k1", orderBody)
		retry := postBaseline(r, "/naive/replay/orders", "k1", orderBody)
		if first.Code != http.StatusCreated || retry.Code != http.StatusCreated || retry.Header().Get("Idempotent-Replayed") != "true" ||
			!bytes.Equal(first.Body.Bytes(), retry.Body.Bytes()) || retry.Header().Get("Location") != first.Header().Get("Location") {
			t.Fatalf("first %d %s, retry %d %v %s", first.Code, first.Body, retry.Code, retry.Header(), retry.Body)
		}
		if other := postBaseline(r, "/naive/replay/orders", "k1", bytes.Replace(orderBody, []byte("cus_1"), []byte("cus_2"), 1)); other.Code != http.StatusUnprocessableEntity {
			t.Fatalf("same key, other body: %d", other.Code)
		}
		if n := count(t, db, "bench_naive_orders"); n != 1 {
			t.Fatalf("%d orders, want 1", n)
		}
	})
}

// TestFloorWritesOrderItemsAndEvent: the floor's one batch commits the
// order, its items and its outbox row (PostgreSQL only).
func TestFloorWritesOrderItemsAndEvent(t *testing.T) {
	t.Parallel()
	r, db, _ := setupBaselines(t, testdb.New(t, "postgres"))
	if rec := postBaseline(r, "/naive/floor/orders", "", orderBody); rec.Code != http.StatusCreated {
		t.Fatalf("floor: %d %s", rec.Code, rec.Body)
	}
	if o, i, e := count(t, db, "bench_naive_orders"), count(t, db, "bench_naive_order_items"), count(t, db, "bench_naive_outbox"); o != 1 || i != 2 || e != 1 {
		t.Fatalf("%d orders, %d items, %d events; want 1, 2, 1", o, i, e)
	}
}
