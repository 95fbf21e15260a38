package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/prometheus/client_golang/prometheus/testutil"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/outbox/natsjs"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/internal/testnats"
	"github.com/retrysafe/retrysafe/resources/ledger"
	"github.com/retrysafe/retrysafe/resources/orders"
)

// outboxEvents counts the outbox events of type typ.
func (e *env) outboxEvents(typ string) int64 {
	e.t.Helper()
	return e.count("outbox_events", "type = ?", typ)
}

// ledgerEntries lists the tenant's ledger through the API.
func (e *env) ledgerEntries(token string) []ledger.Entry {
	e.t.Helper()
	r := e.do(http.MethodGet, "/v1/ledger?limit=100", token, nil)
	wantStatus(e.t, r, http.StatusOK)
	var page ledger.Page
	if err := json.Unmarshal(r.Body, &page); err != nil {
		e.t.Fatalf("ledger: %v: %s", err, r.Body)
	}
	return page.Items
}

// pendingEvents reads the outbox events the relay has not published, by
// running a relay with a publisher that refuses nothing and records all.
func (e *env) pendingEvents() []outbox.Event {
	e.t.Helper()
	var got []outbox.Event
	relay, err := outbox.NewRelay(e.app.DB, outbox.PublisherFunc(func(_ context.Context, ev outbox.Event) error {
		got = append(got, ev)
		return nil
	}), outbox.Config{})
	if err != nil {
		e.t.Fatal(err)
	}
	if _, err := relay.Drain(context.Background()); err != nil {
		e.t.Fatal(err)
	}
	return got
}

// gauge scrapes the app's registry for the value of an unlabelled metric.
func (e *env) gauge(name string) float64 {
	e.t.Helper()
	families, err := e.app.Registry.Gather()
	if err != nil {
		e.t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() == name && len(f.GetMetric()) == 1 {
			m := f.GetMetric()[0]
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
	}
	e.t.Fatalf("metric %s not found", name)
	return 0
}

// eventually polls cond every 20ms until it holds or 20s passed.
func eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestReplayedWritesEmitNoEvent(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id := uuid.NewString()
		first := e.do(http.MethodPut, "/v1/orders/"+id, tokenAcme, orderBody(2, "10.00"))
		wantStatus(t, first, http.StatusCreated)
		wantReplay(t, e.do(http.MethodPut, "/v1/orders/"+id, tokenAcme, orderBody(2, "10.00")), first)
		legacy := e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(3, "10.00"), "Idempotency-Key", "legacy-1")
		wantStatus(t, legacy, http.StatusCreated)
		wantReplay(t, e.do(http.MethodPost, "/v1/orders", tokenAcme, orderBody(3, "10.00"), "Idempotency-Key", "legacy-1"), legacy)
		if n := e.outboxEvents("order.created"); n != 2 {
			t.Fatalf("order.created events = %d, want 2 (one per insert)", n)
		}

		paid := e.pay(tokenAcme, "k-pay", paymentBody(4200, "pm_card_visa"))
		wantStatus(t, paid, http.StatusCreated)
		wantReplay(t, e.pay(tokenAcme, "k-pay", paymentBody(4200, "pm_card_visa")), paid)
		declined := e.pay(tokenAcme, "k-dec", paymentBody(4200, "pm_card_declined"))
		wantStatus(t, declined, http.StatusPaymentRequired)
		wantReplay(t, e.pay(tokenAcme, "k-dec", paymentBody(4200, "pm_card_declined")), declined)
		if s, d := e.outboxEvents("payment.succeeded"), e.outboxEvents("payment.declined"); s != 1 || d != 1 {
			t.Fatalf("payment events: succeeded %d, declined %d; want 1 and 1", s, d)
		}
		events := e.pendingEvents()
		if len(events) != 4 {
			t.Fatalf("relayed %d events, want 4", len(events))
		}
		for _, ev := range events {
			// An order's first event is numbered by its outbox position on
			// PostgreSQL (outbox.AppendOrdered), a payment's by its counter.
			firstSeq := ev.Seq == 1 || (ev.AggregateType == orders.AggregateType && ev.Seq > 0)
			if ev.Tenant != "acme" || !firstSeq || ev.ID == uuid.Nil || !json.Valid(ev.Payload) {
				t.Fatalf("event %+v", ev)
			}
		}
	})
}

// TestOrderEventsAreNumberedInCommitOrder replaces one order from eight
// clients at once and submits it: its events carry increasing sequence
// numbers in the order their changes committed (each payload's version is
// one more than the last, from 1 to the order's final version), and on
// PostgreSQL no counter row is kept for the order (outbox.AppendOrdered).
func TestOrderEventsAreNumberedInCommitOrder(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		id := uuid.New()
		wantStatus(t, e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(1, "10.00")), http.StatusCreated)
		var wg sync.WaitGroup
		statuses := make(chan int, 8)
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				statuses <- e.do(http.MethodPut, orderPath(id), tokenAcme, orderBody(2+i, "10.00")).Status
			}()
		}
		wg.Wait()
		close(statuses)
		for s := range statuses {
			if s != http.StatusOK && s != http.StatusConflict {
				t.Fatalf("concurrent replace: %d", s)
			}
		}
		wantStatus(t, e.do(http.MethodPost, orderPath(id)+"/submit", tokenAcme, nil), http.StatusOK)
		final := e.order("acme", id).Version
		var last, want int64
		for _, ev := range e.pendingEvents() {
			if ev.AggregateID != id.String() {
				continue
			}
			var body struct {
				Version int64 `json:"version"`
			}
			if err := json.Unmarshal(ev.Payload, &body); err != nil {
				t.Fatal(err)
			}
			want++
			if ev.Seq <= last || body.Version != want {
				t.Fatalf("%s seq %d (after %d) carries version %d, want %d", ev.Type, ev.Seq, last, body.Version, want)
			}
			last = ev.Seq
		}
		if want != final || final < 3 {
			t.Fatalf("%d events for an order at version %d", want, final)
		}
		if n := e.count("outbox_sequences", "aggregate_type = ? AND aggregate_id = ?", orders.AggregateType, id.String()); n != 0 && e.app.DB.Driver.Name() == "postgres" {
			t.Fatalf("%d counter rows for the order on PostgreSQL, want 0", n)
		}
	})
}

// TestLedgerAppliesAnEventOnce delivers one payment.succeeded twice, and
// another ten times at once: each makes exactly one ledger entry.
func TestLedgerAppliesAnEventOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		wantStatus(t, e.pay(tokenAcme, "k-1", paymentBody(4200, "pm_card_visa")), http.StatusCreated)
		wantStatus(t, e.pay(tokenAcme, "k-2", paymentBody(100, "pm_card_visa")), http.StatusCreated)
		events := e.pendingEvents()
		if len(events) != 2 {
			t.Fatalf("%d events, want 2", len(events))
		}
		handle := e.app.Events.Ledger.Handle
		for i := 0; i < 2; i++ {
			if err := handle(context.Background(), events[0]); err != nil {
				t.Fatal(err)
			}
		}
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for i := 0; i < 10; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- handle(context.Background(), events[1])
			}()
		}
		wg.Wait()
		close(errs)
		failed := 0
		for err := range errs {
			if err != nil {
				failed++ // a lock timeout: the broker would redeliver it
			}
		}
		if failed == 10 {
			t.Fatal("every concurrent delivery failed")
		}
		entries := e.ledgerEntries(tokenAcme)
		if len(entries) != 2 {
			t.Fatalf("ledger has %d entries, want 2: %+v", len(entries), entries)
		}
		if n := e.count("inbox_messages", "consumer = ?", ledger.Consumer); n != 2 {
			t.Fatalf("inbox rows = %d, want 2", n)
		}
		if got := e.ledgerEntries(tokenGlobex); len(got) != 0 {
			t.Fatalf("globex sees acme's ledger: %+v", got)
		}
	})
}

// natsEnv starts the demo with events on a test stream of the NATS server
// (through url when given: a proxy).
func natsEnv(t *testing.T, dsn string, srv *testnats.Server, url string) *env {
	t.Helper()
	if url == "" {
		url = srv.URL
	}
	return newEnv(t, dsn, func(c *app.Config) {
		c.Events = app.EventsConfig{NATSURL: url, Stream: srv.Stream, SubjectPrefix: srv.SubjectPrefix,
			PublishTimeout: 500 * time.Millisecond, NakDelay: 50 * time.Millisecond,
			Relay: outbox.Config{PollInterval: 10 * time.Millisecond, BaseBackoff: 50 * time.Millisecond, MaxBackoff: 250 * time.Millisecond}}
	})
}

// TestRelayKilledAfterPublishing: the relay publishes, then dies before it
// marks the event published. The next run publishes it again; the stream
// drops the repeat by Nats-Msg-Id, the inbox would drop a redelivery, and
// the ledger has one entry.
func TestRelayKilledAfterPublishing(t *testing.T) {
	t.Parallel()
	testnats.New(t)
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := natsEnv(t, dsn, testnats.New(t), "")
		ctx := context.Background()
		if err := e.app.Events.StartConsumer(ctx); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, e.pay(tokenAcme, "k-1", paymentBody(4200, "pm_card_visa")), http.StatusCreated)

		var acks []bool
		killCtx, kill := context.WithCancel(ctx)
		dying, err := outbox.NewRelay(e.app.DB, outbox.PublisherFunc(func(ctx context.Context, ev outbox.Event) error {
			ack, err := e.app.Events.NATS.PublishAck(ctx, ev)
			if err != nil {
				return err
			}
			acks = append(acks, ack.Duplicate)
			kill() // the process dies here: published, not settled
			return nil
		}), outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := dying.RunOnce(killCtx); err == nil {
			t.Fatal("the killed run reported success")
		}
		if n := e.count("outbox_events", "parked_at IS NULL"); n != 1 {
			t.Fatalf("pending events after the crash = %d, want 1", n)
		}
		next, err := outbox.NewRelay(e.app.DB, outbox.PublisherFunc(func(ctx context.Context, ev outbox.Event) error {
			ack, err := e.app.Events.NATS.PublishAck(ctx, ev)
			if err == nil {
				acks = append(acks, ack.Duplicate)
			}
			return err
		}), outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		// The dead relay's claim is released when the database notices its
		// connection is gone; until then SKIP LOCKED passes the event by.
		eventually(t, "the event published again", func() bool {
			st, err := next.Drain(ctx)
			if err != nil {
				t.Fatalf("second relay: %v", err)
			}
			return st.Published == 1
		})
		if len(acks) != 2 || acks[0] || !acks[1] {
			t.Fatalf("acks (duplicate?) = %v, want [false true]", acks)
		}
		eventually(t, "one ledger entry", func() bool { return len(e.ledgerEntries(tokenAcme)) == 1 })
		// A redelivery that got past the broker is dropped by the inbox.
		entry := e.ledgerEntries(tokenAcme)[0]
		redelivered := outbox.Event{ID: uuid.MustParse(entry.EventID), Tenant: "acme", Type: ledger.EventPaymentSucceeded,
			AggregateType: "payment", AggregateID: entry.PaymentID, Seq: 1,
			Payload: fmt.Appendf(nil, `{"id":%q,"amount":%d,"currency":%q}`, entry.PaymentID, entry.Amount, entry.Currency)}
		if err := e.app.Events.Ledger.Handle(ctx, redelivered); err != nil {
			t.Fatal(err)
		}
		time.Sleep(200 * time.Millisecond)
		if n := len(e.ledgerEntries(tokenAcme)); n != 1 {
			t.Fatalf("ledger entries = %d, want 1", n)
		}
		if d := testutil.ToFloat64(e.app.Events.Inbox.Duplicates(ledger.Consumer)); d != 1 {
			t.Fatalf("inbox duplicates = %v, want 1", d)
		}
	})
}

// TestBrokerOutage cuts the connection to NATS: requests keep succeeding,
// events accumulate in the outbox, and when NATS is back every event is
// delivered once and the lag returns to zero.
func TestBrokerOutage(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		srv := testnats.New(t)
		proxy := srv.NewProxy(t)
		e := natsEnv(t, dsn, srv, proxy.URL)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := e.app.Start(ctx); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 3; i++ {
			wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("before-%d", i), paymentBody(100+i, "pm_card_visa")), http.StatusCreated)
		}
		eventually(t, "3 ledger entries", func() bool { return len(e.ledgerEntries(tokenAcme)) == 3 })
		// and the relay settled them: an acknowledgement cut in flight
		// would leave one pending through the outage.
		eventually(t, "nothing pending before the outage", func() bool {
			_, pending, _, err := e.app.Events.Relay.Lag(ctx)
			return err == nil && pending == 0
		})

		proxy.Cut()
		for i := 0; i < 5; i++ {
			wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("during-%d", i), paymentBody(200+i, "pm_card_visa")), http.StatusCreated)
			id := uuid.NewString()
			wantStatus(t, e.do(http.MethodPut, "/v1/orders/"+id, tokenAcme, orderBody(1, "1.00")), http.StatusCreated)
		}
		time.Sleep(time.Second)
		lag, pending, _, err := e.app.Events.Relay.Lag(ctx)
		if err != nil || pending != 10 || lag < 500*time.Millisecond {
			t.Fatalf("during the outage: lag %v, pending %d, err %v; want 10 pending and a lag", lag, pending, err)
		}
		if n := len(e.ledgerEntries(tokenAcme)); n != 3 {
			t.Fatalf("ledger entries during the outage = %d, want 3", n)
		}
		if lag := e.gauge("retrysafe_outbox_lag_seconds"); lag < 0.5 {
			t.Fatalf("scraped outbox lag = %v during the outage", lag)
		}

		proxy.Restore()
		eventually(t, "8 ledger entries", func() bool { return len(e.ledgerEntries(tokenAcme)) == 8 })
		eventually(t, "no lag", func() bool {
			lag, pending, parked, err := e.app.Events.Relay.Lag(ctx)
			return err == nil && lag == 0 && pending == 0 && parked == 0
		})
		time.Sleep(200 * time.Millisecond)
		if n := len(e.ledgerEntries(tokenAcme)); n != 8 {
			t.Fatalf("ledger entries = %d, want 8", n)
		}
		if lag, pending := e.gauge("retrysafe_outbox_lag_seconds"), e.gauge("retrysafe_outbox_pending_events"); lag != 0 || pending != 0 {
			t.Fatalf("scraped lag %v, pending %v after the outage", lag, pending)
		}
		if retried := e.gauge("retrysafe_outbox_retried_total"); retried == 0 {
			t.Fatal("no retry counted during the outage")
		}
	})
}

// TestTraceOfAPaymentAndItsConsumer records the spans of one payment and of
// the consumer that applied its event.
func TestTraceOfAPaymentAndItsConsumer(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		exporter := tracetest.NewInMemoryExporter()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exporter))
		e := newEnv(t, dsn, func(c *app.Config) { c.TracerProvider = tp })
		wantStatus(t, e.pay(tokenAcme, "k-traced", paymentBody(4200, "pm_card_visa")), http.StatusCreated)
		if _, err := e.app.Events.Relay.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		spans := exporter.GetSpans()
		var request *tracetest.SpanStub
		for i := range spans {
			if spans[i].Name == "POST /v1/payments" {
				request = &spans[i]
			}
		}
		if request == nil {
			t.Fatalf("no request span among %d", len(spans))
		}
		attrs := map[string]string{}
		for _, kv := range request.Attributes {
			attrs[string(kv.Key)] = kv.Value.Emit()
		}
		want := map[string]string{"retrysafe.pattern": "post", "retrysafe.operation": "payments.create",
			"retrysafe.outcome": "executed", "retrysafe.key_sha256": telemetry.KeyHash("k-traced"),
			"http.response.status_code": "201"}
		for k, v := range want {
			if attrs[k] != v {
				t.Fatalf("request span %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
			}
		}
		children := map[string]int{}
		var consumer *tracetest.SpanStub
		for i, s := range spans {
			if s.Parent.SpanID() == request.SpanContext.SpanID() {
				children[s.Name]++
			}
			if s.Name == "consume payment.succeeded" {
				consumer = &spans[i]
			}
		}
		if children["postkeys.claim"] != 1 || children["postkeys.phase"] != 2 || children["payments.provider.charge"] != 1 {
			t.Fatalf("children of the request span: %v", children)
		}
		if consumer == nil || len(consumer.Links) != 1 || consumer.Links[0].SpanContext.TraceID() != request.SpanContext.TraceID() {
			t.Fatalf("consumer span is not linked to the request: %+v", consumer)
		}
		// The relay's producer span is in the request's trace, and the
		// consumer links to it.
		var producer *tracetest.SpanStub
		for i := range spans {
			if spans[i].Name == "publish payment.succeeded" {
				producer = &spans[i]
			}
		}
		if producer == nil || producer.SpanContext.TraceID() != request.SpanContext.TraceID() ||
			consumer.Links[0].SpanContext.SpanID() != producer.SpanContext.SpanID() {
			t.Fatalf("producer span %+v, consumer link %+v", producer, consumer.Links)
		}
	})
}

// TestLedgerOverJetStreamDropsRedeliveries puts one payment.succeeded on
// the stream twelve times (without Nats-Msg-Id, so the stream keeps every
// copy, as redeliveries would be): the consumer gets them all, and the
// ledger has one entry.
func TestLedgerOverJetStreamDropsRedeliveries(t *testing.T) {
	t.Parallel()
	testnats.New(t)
	testdb.Run(t, func(t *testing.T, dsn string) {
		srv := testnats.New(t)
		e := natsEnv(t, dsn, srv, "")
		ctx := context.Background()
		if err := e.app.Events.StartConsumer(ctx); err != nil {
			t.Fatal(err)
		}
		wantStatus(t, e.pay(tokenAcme, "k-1", paymentBody(4200, "pm_card_visa")), http.StatusCreated)
		var copies []*nats.Msg
		relay, err := outbox.NewRelay(e.app.DB, outbox.PublisherFunc(func(ctx context.Context, ev outbox.Event) error {
			for i := 0; i < 12; i++ {
				msg := nats.NewMsg(e.app.Events.NATS.Subject(ev))
				msg.Data = ev.Payload
				msg.Header.Set(natsjs.HeaderEventID, ev.ID.String())
				msg.Header.Set(natsjs.HeaderTenant, ev.Tenant)
				msg.Header.Set(natsjs.HeaderType, ev.Type)
				msg.Header.Set(natsjs.HeaderAggregateType, ev.AggregateType)
				msg.Header.Set(natsjs.HeaderAggregateID, ev.AggregateID)
				msg.Header.Set(natsjs.HeaderSeq, "1")
				copies = append(copies, msg)
			}
			return nil
		}), outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := relay.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		for _, msg := range copies {
			if _, err := srv.JetStream.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
		dup := e.app.Events.Inbox.Duplicates(ledger.Consumer)
		eventually(t, "11 duplicates dropped", func() bool { return testutil.ToFloat64(dup) == 11 })
		if n := len(e.ledgerEntries(tokenAcme)); n != 1 {
			t.Fatalf("ledger entries = %d, want 1", n)
		}
	})
}

func TestLedgerListIsTenantScopedAndPaginated(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		for i := 0; i < 5; i++ {
			wantStatus(t, e.pay(tokenAcme, fmt.Sprintf("k-%d", i), paymentBody(100+i, "pm_card_visa")), http.StatusCreated)
		}
		wantStatus(t, e.pay(tokenGlobex, "k-g", paymentBody(7, "pm_card_visa")), http.StatusCreated)
		if _, err := e.app.Events.Relay.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		cursor := ""
		for pages := 0; ; pages++ {
			path := "/v1/ledger?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			r := e.do(http.MethodGet, path, tokenAcme, nil)
			wantStatus(t, r, http.StatusOK)
			var page ledger.Page
			if err := json.Unmarshal(r.Body, &page); err != nil {
				t.Fatal(err)
			}
			for _, it := range page.Items {
				if seen[it.ID] || it.Currency != "usd" {
					t.Fatalf("entry %+v repeated or wrong", it)
				}
				seen[it.ID] = true
			}
			if page.NextCursor == nil {
				break
			}
			if pages > 5 {
				t.Fatal("pagination does not end")
			}
			cursor = *page.NextCursor
		}
		if len(seen) != 5 {
			t.Fatalf("acme's ledger has %d entries, want 5", len(seen))
		}
		if g := e.ledgerEntries(tokenGlobex); len(g) != 1 || g[0].Amount != 7 {
			t.Fatalf("globex's ledger %+v", g)
		}
		wantStatus(t, e.do(http.MethodGet, "/v1/ledger?limit=0", tokenAcme, nil), http.StatusBadRequest)
		wantStatus(t, e.do(http.MethodGet, "/v1/ledger?cursor=nope", tokenAcme, nil), http.StatusBadRequest)
		wantStatus(t, e.do(http.MethodGet, "/v1/ledger", "", nil), http.StatusUnauthorized)
	})
}

// TestReconciledPaymentEmitsOnce: a charge whose answer was lost is
// recorded by the reconciling retry; payment.succeeded is written once, by
// the phase that records it, and the ledger gets one entry.
func TestReconciledPaymentEmitsOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, losesAnswersQuickly)
		wantStatus(t, e.pay(tokenAcme, "k-timeout", paymentBody(4200, "pm_card_timeout_after_charge")), http.StatusConflict)
		if n := e.outboxEvents("payment.succeeded"); n != 0 {
			t.Fatalf("%d events before the outcome is known, want 0", n)
		}
		final := e.pay(tokenAcme, "k-timeout", paymentBody(4200, "pm_card_timeout_after_charge"))
		wantStatus(t, final, http.StatusCreated)
		wantReplay(t, e.pay(tokenAcme, "k-timeout", paymentBody(4200, "pm_card_timeout_after_charge")), final)
		if n := e.outboxEvents("payment.succeeded"); n != 1 {
			t.Fatalf("%d payment.succeeded events, want 1", n)
		}
		if _, err := e.app.Events.Relay.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		entries := e.ledgerEntries(tokenAcme)
		if len(entries) != 1 || entries[0].PaymentID != final.JSON(t)["id"] || entries[0].Amount != 4200 {
			t.Fatalf("ledger %+v", entries)
		}
	})
}
