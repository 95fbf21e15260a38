package natsjs_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go/jetstream"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/outbox/natsjs"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/internal/testnats"
	"github.com/retrysafe/retrysafe/migrations"
)

func setup(t *testing.T, dialect string) (*store.DB, *testnats.Server, *natsjs.Publisher) {
	return setupBench(t, dialect)
}

func setupBench(t testing.TB, dialect string) (*store.DB, *testnats.Server, *natsjs.Publisher) {
	t.Helper()
	srv := testnats.New(t)
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(t, dialect), store.Config{LockTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	pub, err := natsjs.NewPublisher(srv.JetStream, natsjs.Config{Stream: srv.Stream, SubjectPrefix: srv.SubjectPrefix})
	if err != nil {
		t.Fatal(err)
	}
	return db, srv, pub
}

func emit(t testing.TB, db *store.DB, tenant, aggregate string) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *gorm.DB) error {
		ev, err := outbox.NewEvent(tenant, "thing.happened", "thing", aggregate, map[string]string{"a": aggregate})
		if err != nil {
			return err
		}
		_, err = outbox.Write(context.Background(), tx, ev)
		return err
	})
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
}

func TestPublishDeduplicatesByEventID(t *testing.T) {
	t.Parallel()
	_, srv, pub := setup(t, "sqlite")
	ctx := context.Background()
	ev, _ := outbox.NewEvent("acme", "payment.succeeded", "payment", "pay_1", map[string]int{"amount": 42})
	written := outbox.Event(ev)
	written.ID = [16]byte{1}
	written.Seq = 1
	written.Headers = map[string]string{"traceparent": "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"}
	first, err := pub.PublishAck(ctx, written)
	if err != nil || first.Duplicate {
		t.Fatalf("first publish: %+v %v", first, err)
	}
	again, err := pub.PublishAck(ctx, written)
	if err != nil || !again.Duplicate || again.Sequence != first.Sequence {
		t.Fatalf("second publish is not a duplicate: %+v %v", again, err)
	}
	stream, err := srv.JetStream.Stream(ctx, srv.Stream)
	if err != nil {
		t.Fatal(err)
	}
	msg, err := stream.GetMsg(ctx, first.Sequence)
	if err != nil {
		t.Fatal(err)
	}
	if want := srv.SubjectPrefix + ".acme.payment.succeeded"; msg.Subject != want {
		t.Fatalf("subject %q, want %q", msg.Subject, want)
	}
	if msg.Header.Get("Nats-Msg-Id") != written.ID.String() || msg.Header.Get("traceparent") == "" {
		t.Fatalf("headers %v", msg.Header)
	}
	info, err := stream.Info(ctx)
	if err != nil || info.State.Msgs != 1 {
		t.Fatalf("stream holds %d messages, want 1 (%v)", info.State.Msgs, err)
	}
}

// TestTwoRelaysDeliverEverythingInOrder runs two relays through JetStream
// while 1,000 events of 50 aggregates are written, on each server
// configured (PostgreSQL, MariaDB); the consumer sees every event, each
// aggregate's in sequence order.
func TestTwoRelaysDeliverEverythingInOrder(t *testing.T) {
	t.Parallel()
	for _, server := range testdb.Servers(t) {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			twoRelaysDeliverEverythingInOrder(t, server)
		})
	}
}

// twoRelaysDeliverEverythingInOrder is TestTwoRelaysDeliverEverythingInOrder
// on a new database of dialect.
func twoRelaysDeliverEverythingInOrder(t *testing.T, dialect string) {
	db, srv, _ := setup(t, dialect)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var (
		mu       sync.Mutex
		seen     = map[string]bool{}
		last     = map[string]int64{}
		disorder []string
	)
	cons, err := natsjs.Consume(ctx, srv.JetStream, func(_ context.Context, ev outbox.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if seen[ev.ID.String()] {
			return nil
		}
		seen[ev.ID.String()] = true
		if ev.Seq != last[ev.AggregateID]+1 {
			disorder = append(disorder, fmt.Sprintf("%s: %d after %d", ev.AggregateID, ev.Seq, last[ev.AggregateID]))
		}
		last[ev.AggregateID] = ev.Seq
		return nil
	}, natsjs.ConsumerConfig{Durable: "order_check", Stream: srv.Stream, SubjectPrefix: srv.SubjectPrefix})
	if err != nil {
		t.Fatal(err)
	}
	defer cons.Stop()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		pub, _ := natsjs.NewPublisher(srv.JetStream, natsjs.Config{Stream: srv.Stream, SubjectPrefix: srv.SubjectPrefix})
		relay, err := outbox.NewRelay(db, pub, outbox.Config{BatchSize: 25, PollInterval: 5 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if err := relay.Start(ctx); err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() { defer wg.Done(); <-ctx.Done(); relay.Stop() }()
	}
	for round := 0; round < 20; round++ {
		for a := 0; a < 50; a++ {
			emit(t, db, "acme", fmt.Sprintf("agg%02d", a))
		}
	}
	// Wait until every event was seen and marked published: a relay
	// stopped between a publish and its mark would publish again.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		n := len(seen)
		mu.Unlock()
		var pending int64
		db.Gorm.Table("outbox_events").Where("parked_at IS NULL").Count(&pending)
		if n == 1000 && pending == 0 {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1000 {
		t.Fatalf("consumer saw %d distinct events, want 1000", len(seen))
	}
	if len(disorder) > 0 {
		t.Fatalf("out of order: %v", disorder)
	}
	for a, n := range last {
		if n != 20 {
			t.Fatalf("%s: last seq %d, want 20", a, n)
		}
	}
	var pending int64
	db.Gorm.Table("outbox_events").Where("parked_at IS NULL").Count(&pending)
	if pending != 0 {
		t.Fatalf("%d events still pending", pending)
	}
}

// TestConsumeBeforeTheFirstPublish: a consumer that starts before any event
// was published creates the stream as the publisher would (its subjects,
// its duplicate window), and then gets every event the publisher sends
// exactly once, a republished one included.
func TestConsumeBeforeTheFirstPublish(t *testing.T) {
	t.Parallel()
	srv := testnats.New(t)
	ctx := t.Context()
	if _, err := srv.JetStream.Stream(ctx, srv.Stream); !errors.Is(err, jetstream.ErrStreamNotFound) {
		t.Fatalf("the stream exists before the test: %v", err)
	}
	const n = 20
	var (
		mu   sync.Mutex
		got  = map[string]int{}
		done = make(chan struct{})
	)
	cons, err := natsjs.Consume(ctx, srv.JetStream, func(_ context.Context, ev outbox.Event) error {
		mu.Lock()
		defer mu.Unlock()
		if got[ev.ID.String()]++; len(got) == n && got[ev.ID.String()] == 1 {
			close(done)
		}
		return nil
	}, natsjs.ConsumerConfig{Durable: "early", Stream: srv.Stream, SubjectPrefix: srv.SubjectPrefix})
	if err != nil {
		t.Fatalf("Consume before the first publish: %v", err)
	}
	defer cons.Stop()
	stream, err := srv.JetStream.Stream(ctx, srv.Stream)
	if err != nil {
		t.Fatal(err)
	}
	info := stream.CachedInfo().Config
	if len(info.Subjects) != 1 || info.Subjects[0] != srv.SubjectPrefix+".>" ||
		info.Duplicates != natsjs.DefaultDuplicateWindow || info.Storage != jetstream.FileStorage {
		t.Fatalf("the consumer created the stream with subjects %v, duplicate window %v, storage %v; want the publisher's",
			info.Subjects, info.Duplicates, info.Storage)
	}

	pub, err := natsjs.NewPublisher(srv.JetStream, natsjs.Config{Stream: srv.Stream, SubjectPrefix: srv.SubjectPrefix})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		ev := outbox.Event{ID: uuid.New(), Tenant: "acme", Type: "thing.happened", AggregateType: "thing",
			AggregateID: "a1", Seq: int64(i + 1), Payload: []byte(`{}`)}
		if err := pub.Publish(ctx, ev); err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
		if i == 0 {
			// A relay that died between publishing and marking publishes
			// again: the stream's duplicate window drops it.
			if ack, err := pub.PublishAck(ctx, ev); err != nil || !ack.Duplicate {
				t.Fatalf("republish: %+v, %v; want a duplicate", ack, err)
			}
		}
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatal("the consumer did not get every event")
	}
	// The last event is acked after its handler returned: wait for the
	// ack, then nothing is left to deliver.
	ci, err := srv.JetStream.Consumer(ctx, srv.Stream, "early")
	if err != nil {
		t.Fatal(err)
	}
	var state *jetstream.ConsumerInfo
	for {
		if state, err = ci.Info(ctx); err != nil {
			t.Fatal(err)
		}
		if state.NumAckPending == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if state.Delivered.Consumer != n || state.NumRedelivered != 0 || state.NumPending != 0 {
		t.Fatalf("consumer delivered %d (%d redelivered, %d pending), want %d once each",
			state.Delivered.Consumer, state.NumRedelivered, state.NumPending, n)
	}
	si, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if si.State.Msgs != n {
		t.Fatalf("the stream holds %d messages, want %d", si.State.Msgs, n)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, times := range got {
		if times != 1 {
			t.Fatalf("event %s delivered %d times", id, times)
		}
	}
}

func TestOversizedEventIsRefused(t *testing.T) {
	t.Parallel()
	_, srv, pub := setup(t, "sqlite")
	big := make([]byte, 0, 9<<20)
	big = append(big, '"')
	for len(big) < 9<<20 {
		big = append(big, 'x')
	}
	big = append(big, '"')
	ev := outbox.Event{ID: [16]byte{2}, Tenant: "acme", Type: "thing.happened", AggregateType: "thing", AggregateID: "a1", Seq: 1, Payload: big}
	if err := pub.Publish(context.Background(), ev); !errors.Is(err, outbox.ErrRefused) {
		t.Fatalf("err = %v, want ErrRefused", err)
	}
	_ = srv
}
