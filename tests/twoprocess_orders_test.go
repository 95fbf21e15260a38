package tests

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestTwoProcessesCreateOneOrder splits 40 concurrent identical PUTs of a
// new order between two demo processes on one database, on each server
// configured (PostgreSQL, MariaDB): the (tenant_id, id) primary key is
// shared, so exactly one row and one order.created event exist, and every
// answer is the same 201.
func TestTwoProcessesCreateOneOrder(t *testing.T) {
	t.Parallel()
	servers := testdb.Servers(t)
	bin := buildDemo(t)
	for _, server := range servers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			twoProcessesCreateOneOrder(t, bin, testdb.New(t, server))
		})
	}
}

// twoProcessesCreateOneOrder is TestTwoProcessesCreateOneOrder on the
// database dsn.
func twoProcessesCreateOneOrder(t *testing.T, bin, dsn string) {
	bases := []string{demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn, Args: keepEvents}).URL(),
		demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn, Args: keepEvents}).URL()}

	id := uuid.New()
	const n = 40
	var (
		wg     sync.WaitGroup
		start  = make(chan struct{})
		status = make([]int, n)
		bodies = make([][]byte, n)
		fresh  = make([]bool, n)
		client = &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: n}}
	)
	defer client.CloseIdleConnections()
	for i := range n {
		wg.Go(func() {
			<-start
			req, err := http.NewRequest(http.MethodPut, bases[i%2]+orderPath(id), bytes.NewReader(orderBody(2, "10.00")))
			if err != nil {
				t.Error(err)
				return
			}
			req.Header.Set("Authorization", "Bearer "+tokenAcme)
			res, err := client.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer res.Body.Close()
			bodies[i], _ = io.ReadAll(res.Body)
			status[i], fresh[i] = res.StatusCode, res.Header.Get("Idempotent-Replayed") == ""
		})
	}
	close(start)
	wg.Wait()
	created := 0
	for i := range n {
		if status[i] != http.StatusCreated {
			t.Fatalf("request %d: status %d: %s", i, status[i], bodies[i])
		}
		if !bytes.Equal(bodies[i], bodies[0]) {
			t.Fatalf("request %d answered another order:\n%s\n%s", i, bodies[i], bodies[0])
		}
		if fresh[i] {
			created++
		}
	}
	if created != 1 {
		t.Fatalf("%d answers were not replays, want exactly 1", created)
	}

	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var rows, items int64
	if err := db.Gorm.Table("orders").Where("id = ?", id.String()).Count(&rows).Error; err != nil {
		t.Fatal(err)
	}
	events := eventsWritten(t, db.Gorm, "aggregate_type = 'order' AND aggregate_id = ? AND type = 'order.created'", id.String())
	if err := db.Gorm.Table("order_items").Where("order_id = ?", id.String()).Count(&items).Error; err != nil {
		t.Fatal(err)
	}
	if rows != 1 || items != 1 || len(events) != 1 {
		t.Fatalf("rows = %d, order_items = %d, order.created events = %d; want 1, 1 and 1:\n%s", rows, items, len(events), joinLines(events))
	}
}
