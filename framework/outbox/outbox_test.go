package outbox_test

import (
	"context"
	"errors"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/outbox"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/internal/testlog"
	"github.com/retrysafe/retrysafe/migrations"
)

// setup opens a migrated database of its own.
func setup(t testing.TB, dsn string) *store.DB {
	t.Helper()
	ctx := context.Background()
	// Writers of one aggregate queue on its counter row: a minute's lock
	// and statement timeouts keep how long the last one waits on a loaded
	// machine out of the verdicts.
	db, err := store.Open(ctx, dsn, store.Config{LockTimeout: time.Minute, StatementTimeout: time.Minute})
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	t.Cleanup(func() { _ = db.Close() })
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatalf("migrations: %v", err)
	}
	return db
}

func emit(t testing.TB, db *store.DB, tenant, aggregate string, n int) {
	t.Helper()
	err := db.Write(context.Background(), func(tx *gorm.DB) error {
		for i := 0; i < n; i++ {
			ev, err := outbox.NewEvent(tenant, "thing.happened", "thing", aggregate, map[string]int{"i": i})
			if err != nil {
				return err
			}
			if _, err := outbox.Write(context.Background(), tx, ev); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatalf("emit: %v", err)
	}
}

// recorder is an in-memory publisher that keeps what it got.
type recorder struct {
	mu     sync.Mutex
	events []outbox.Event
	fail   func(outbox.Event) error
}

func (r *recorder) Publish(_ context.Context, ev outbox.Event) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		if err := r.fail(ev); err != nil {
			return err
		}
	}
	r.events = append(r.events, ev)
	return nil
}

// refusing is a recorder that refuses every event of the aggregate.
func refusing(aggregate string) *recorder {
	return &recorder{fail: func(ev outbox.Event) error {
		if ev.AggregateID == aggregate {
			return fmt.Errorf("%w: refused for the test", outbox.ErrRefused)
		}
		return nil
	}}
}

func (r *recorder) got() []outbox.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]outbox.Event(nil), r.events...)
}

// wantInOrder stops the test unless every aggregate's events arrived with
// seq 1..n in order, n given by want.
func wantInOrder(t *testing.T, events []outbox.Event, want map[string]int64) {
	t.Helper()
	last := map[string]int64{}
	for _, ev := range events {
		k := ev.Tenant + "/" + ev.AggregateID
		if ev.Seq != last[k]+1 {
			t.Fatalf("%s: got seq %d after %d", k, ev.Seq, last[k])
		}
		last[k] = ev.Seq
	}
	for k, n := range want {
		if last[k] != n {
			t.Fatalf("%s: last seq %d, want %d", k, last[k], n)
		}
	}
}

// drain publishes every pending event to a new recorder.
func drain(t *testing.T, db *store.DB) *recorder {
	t.Helper()
	rec := &recorder{}
	relay, err := outbox.NewRelay(db, rec, outbox.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := relay.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
	return rec
}

func TestWriteNumbersPerAggregateUnderConcurrency(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		var wg sync.WaitGroup
		errs := make(chan error, 20)
		for i := 0; i < 20; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for try := 0; ; try++ {
					err := db.Write(context.Background(), func(tx *gorm.DB) error {
						ev, _ := outbox.NewEvent("acme", "thing.happened", "thing", "a1", i)
						_, err := outbox.Write(context.Background(), tx, ev)
						return err
					})
					if errors.Is(err, store.ErrLockTimeout) && try < 20 {
						continue
					}
					errs <- err
					return
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("write: %v", err)
			}
		}
		rec := drain(t, db)
		wantInOrder(t, rec.got(), map[string]int64{"acme/a1": 20})
	})
}

// appendOrdered writes one event of aggregate with outbox.AppendOrdered in
// a transaction that first bumps the aggregate's row in things (the lock
// that orders its writers), with the row's new version as the payload.
func appendOrdered(db *store.DB, aggregate string) error {
	return db.Write(context.Background(), func(tx *gorm.DB) error {
		// The bump, then its value read under the row lock it took (MySQL
		// has no UPDATE … RETURNING).
		var version int64
		if err := tx.Exec("UPDATE things SET version = version + 1 WHERE id = ?", aggregate).Error; err != nil {
			return err
		}
		if err := tx.Raw("SELECT version FROM things WHERE id = ?", aggregate).Scan(&version).Error; err != nil {
			return err
		}
		return outbox.AppendOrdered(context.Background(), tx, outbox.Event{Tenant: "acme", Type: "thing.happened",
			AggregateType: "thing", AggregateID: aggregate, Payload: []byte(fmt.Sprint(version))})
	})
}

// TestAppendOrderedNumbersInCommitOrder: twenty transactions append an
// event of one aggregate at once, each after bumping the aggregate's row.
// The relay publishes them in the order of those bumps, with increasing
// numbers; on PostgreSQL each number is the event's position and no counter
// row is kept. An aggregate numbered by the counter before goes on
// increasing.
func TestAppendOrderedNumbersInCommitOrder(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		if err := db.Gorm.Exec("CREATE TABLE things (id VARCHAR(255) PRIMARY KEY, version BIGINT NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Gorm.Exec("INSERT INTO things VALUES ('a1', 0), ('a2', 2)").Error; err != nil {
			t.Fatal(err)
		}
		emit(t, db, "acme", "a2", 2) // counter: 1, 2
		var wg sync.WaitGroup
		errs := make(chan error, 21)
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for try := 0; ; try++ {
					err := appendOrdered(db, "a1")
					if errors.Is(err, store.ErrLockTimeout) && try < 20 {
						continue
					}
					errs <- err
					return
				}
			}()
		}
		wg.Wait()
		errs <- appendOrdered(db, "a2")
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatalf("append: %v", err)
			}
		}
		type row struct {
			Position, Seq int64
			AggregateID   string
		}
		var rows []row
		if err := db.Gorm.Table("outbox_events").Select("position, seq, aggregate_id").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		var counters int64
		if err := db.Gorm.Table("outbox_sequences").Where("aggregate_id = ?", "a1").Count(&counters).Error; err != nil {
			t.Fatal(err)
		}
		if db.Driver.Name() == "postgres" {
			for _, r := range rows {
				if ordered := r.AggregateID == "a1" || r.Seq > 2; ordered && r.Seq != r.Position {
					t.Fatalf("%s seq %d at position %d", r.AggregateID, r.Seq, r.Position)
				}
			}
			if counters != 0 {
				t.Fatalf("a counter row for an aggregate numbered by position")
			}
		}
		rec := drain(t, db)
		last := map[string]int64{}
		var versions []string
		for _, ev := range rec.got() {
			if ev.Seq <= last[ev.AggregateID] {
				t.Fatalf("%s: seq %d after %d", ev.AggregateID, ev.Seq, last[ev.AggregateID])
			}
			last[ev.AggregateID] = ev.Seq
			if ev.AggregateID == "a1" {
				versions = append(versions, string(ev.Payload))
			}
		}
		var want []string
		for v := 1; v <= 20; v++ {
			want = append(want, fmt.Sprint(v))
		}
		if fmt.Sprint(versions) != fmt.Sprint(want) {
			t.Fatalf("a1's events by seq carry versions %v, want %v", versions, want)
		}
		if len(rec.got()) != 23 || last["a2"] <= 2 {
			t.Fatalf("published %d events, a2 up to seq %d", len(rec.got()), last["a2"])
		}
	})
}

func TestRolledBackWriteLeavesNothing(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		boom := errors.New("boom")
		err := db.Write(context.Background(), func(tx *gorm.DB) error {
			ev, _ := outbox.NewEvent("acme", "thing.happened", "thing", "a1", nil)
			if _, err := outbox.Write(context.Background(), tx, ev); err != nil {
				return err
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("err = %v", err)
		}
		var n int64
		db.Gorm.Table("outbox_events").Count(&n)
		if n != 0 {
			t.Fatalf("%d events after rollback", n)
		}
	})
}

func TestRelayRefusedEventBlocksItsAggregateThenParks(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		emit(t, db, "acme", "bad", 2)
		emit(t, db, "acme", "good", 1)
		now := time.Now().UTC()
		clock := func() time.Time { return now }
		rec := &recorder{fail: func(ev outbox.Event) error {
			if ev.AggregateID == "bad" && ev.Seq == 1 {
				return fmt.Errorf("%w: too large", outbox.ErrRefused)
			}
			return nil
		}}
		relay, err := outbox.NewRelay(db, rec, outbox.Config{MaxAttempts: 3, Now: clock})
		if err != nil {
			t.Fatal(err)
		}
		for i := 1; i <= 3; i++ {
			stats, err := relay.RunOnce(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if i < 3 && stats.Refused != 1 || i == 3 && stats.Parked != 1 {
				t.Fatalf("run %d: %+v", i, stats)
			}
			// bad/2 waits behind bad/1 until bad/1 is parked.
			for _, ev := range rec.got() {
				if ev.AggregateID == "bad" {
					t.Fatalf("run %d published %s/%d before bad/1 was parked", i, ev.AggregateID, ev.Seq)
				}
			}
			now = now.Add(time.Hour) // past any backoff
		}
		if _, err := relay.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		got := rec.got()
		if len(got) != 2 || got[0].AggregateID != "good" || got[1].AggregateID != "bad" || got[1].Seq != 2 {
			t.Fatalf("published %+v", got)
		}
		_, pending, parked, err := relay.Lag(context.Background())
		if err != nil || pending != 0 || parked != 1 {
			t.Fatalf("pending %d parked %d err %v", pending, parked, err)
		}
		// Once the cause is fixed, an operator requeues it.
		var parkedID string
		if err := db.Gorm.Table("outbox_events").Select("id").Where("parked_at IS NOT NULL").Scan(&parkedID).Error; err != nil {
			t.Fatal(err)
		}
		if err := relay.Requeue(context.Background(), uuid.MustParse(parkedID)); err != nil {
			t.Fatal(err)
		}
		if err := relay.Requeue(context.Background(), uuid.MustParse(parkedID)); !errors.Is(err, outbox.ErrNotParked) {
			t.Fatalf("second requeue: %v", err)
		}
		rec.mu.Lock()
		rec.fail = nil
		rec.mu.Unlock()
		if _, err := relay.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		if got := rec.got(); len(got) != 3 || got[2].AggregateID != "bad" || got[2].Seq != 1 {
			t.Fatalf("after the requeue: %+v", got)
		}
	})
}

func TestRelayUnavailableKeepsEventsAndCatchesUp(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		emit(t, db, "acme", "a1", 3)
		down := true
		rec := &recorder{fail: func(outbox.Event) error {
			if down {
				return errors.New("connection refused")
			}
			return nil
		}}
		relay, err := outbox.NewRelay(db, rec, outbox.Config{MaxAttempts: 1})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 5; i++ {
			if _, err := relay.RunOnce(context.Background()); !errors.Is(err, outbox.ErrUnavailable) {
				t.Fatalf("err = %v", err)
			}
		}
		down = false
		if _, err := relay.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		wantInOrder(t, rec.got(), map[string]int64{"acme/a1": 3})
		lag, pending, parked, err := relay.Lag(context.Background())
		if err != nil || lag != 0 || pending != 0 || parked != 0 {
			t.Fatalf("lag %v pending %d parked %d err %v", lag, pending, parked, err)
		}
	})
}

func TestRelayCleanupDeletesPublishedInBatches(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		emit(t, db, "acme", "a1", 5)
		now := time.Now().UTC()
		relay, err := outbox.NewRelay(db, &recorder{}, outbox.Config{Now: func() time.Time { return now }, Retention: time.Hour, CleanupBatchSize: 2})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := relay.Drain(context.Background()); err != nil {
			t.Fatal(err)
		}
		var kept, left int64
		if err := db.Gorm.Table("outbox_published").Count(&kept).Error; err != nil || kept != 5 {
			t.Fatalf("kept %d published events (%v), want 5", kept, err)
		}
		if err := db.Gorm.Table("outbox_events").Count(&left).Error; err != nil || left != 0 {
			t.Fatalf("%d events left in outbox_events (%v), want none", left, err)
		}
		if st, err := relay.CleanupOnce(context.Background()); err != nil || st.Deleted != 0 {
			t.Fatalf("within retention: %+v %v", st, err)
		}
		now = now.Add(2 * time.Hour)
		st, err := relay.CleanupOnce(context.Background())
		if err != nil || st.Deleted != 5 || st.Batches != 3 {
			t.Fatalf("cleanup: %+v %v", st, err)
		}
	})
}

// TestRelayDeletesWhatItPublishes: with no retention (the default) the
// batch that publishes an event deletes it; a refused event stays, with its
// attempt counted, and so does the event waiting behind it.
func TestRelayDeletesWhatItPublishes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		emit(t, db, "acme", "good", 3)
		emit(t, db, "acme", "bad", 2)
		rec := refusing("bad")
		relay, err := outbox.NewRelay(db, rec, outbox.Config{})
		if err != nil {
			t.Fatal(err)
		}
		stats, err := relay.RunOnce(context.Background())
		if err != nil || stats.Published != 3 || stats.Refused != 1 {
			t.Fatalf("run: %+v %v", stats, err)
		}
		type left struct {
			AggregateID string
			Seq         int64
			Attempts    int
		}
		var rows []left
		if err := db.Gorm.Table("outbox_events").Select("aggregate_id, seq, attempts").Order("position").Find(&rows).Error; err != nil {
			t.Fatal(err)
		}
		if want := []left{{"bad", 1, 1}, {"bad", 2, 0}}; fmt.Sprint(rows) != fmt.Sprint(want) {
			t.Fatalf("left in the outbox: %+v, want %+v", rows, want)
		}
		wantInOrder(t, rec.got(), map[string]int64{"acme/good": 3})
		if st, err := relay.CleanupOnce(context.Background()); err != nil || st.Deleted != 0 {
			t.Fatalf("cleanup deleted %+v (%v): pending events are never deleted", st, err)
		}
	})
}

// TestTwoRelaysKeepOrderPerAggregate runs two relays at once on
// PostgreSQL and on MariaDB, the databases whose claims lock (SKIP
// LOCKED), over 1,000 events of 50 aggregates written while they run.
func TestTwoRelaysKeepOrderPerAggregate(t *testing.T) {
	t.Parallel()
	for _, dialect := range []string{"postgres", "mysql"} {
		t.Run(dialect, func(t *testing.T) {
			t.Parallel()
			twoRelaysKeepOrder(t, setup(t, testdb.New(t, dialect)))
		})
	}
}

func twoRelaysKeepOrder(t *testing.T, db *store.DB) {
	rec := &recorder{}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		relay, err := outbox.NewRelay(db, rec, outbox.Config{BatchSize: 30, PollInterval: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				if _, err := relay.RunOnce(ctx); err != nil && ctx.Err() == nil {
					t.Errorf("relay: %v", err)
					return
				}
			}
		}()
	}
	want := map[string]int64{}
	for round := 0; round < 20; round++ {
		for a := 0; a < 50; a++ {
			emit(t, db, "acme", fmt.Sprintf("agg%02d", a), 1)
			want[fmt.Sprintf("acme/agg%02d", a)]++
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for len(rec.got()) < 1000 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	got := rec.got()
	if len(got) != 1000 {
		t.Fatalf("published %d events, want 1000", len(got))
	}
	wantInOrder(t, got, want)
}

// TestEventsBehindABackoffDoNotStarveOthers: an aggregate whose head waits
// out a backoff has more later events than a batch holds; another
// aggregate's event behind them is still published.
func TestEventsBehindABackoffDoNotStarveOthers(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		emit(t, db, "acme", "bad", 6)
		emit(t, db, "acme", "good", 1)
		rec := refusing("bad")
		relay, err := outbox.NewRelay(db, rec, outbox.Config{BatchSize: 2, BaseBackoff: time.Hour, MaxBackoff: time.Hour})
		if err != nil {
			t.Fatal(err)
		}
		if st, err := relay.RunOnce(context.Background()); err != nil || st.Refused != 1 {
			t.Fatalf("first run: %+v %v", st, err)
		}
		if st, err := relay.RunOnce(context.Background()); err != nil || st.Published != 1 {
			t.Fatalf("second run: %+v %v", st, err)
		}
		if got := rec.got(); len(got) != 1 || got[0].AggregateID != "good" {
			t.Fatalf("published %+v", got)
		}
	})
}

// TestRelayVacuumsTheOutbox: on PostgreSQL a running relay vacuums
// outbox_events every VacuumInterval while it publishes, and a relay
// whose user does not own the table says so once and goes on publishing.
func TestRelayVacuumsTheOutbox(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.New(t, "postgres")
	db := setup(t, dsn)
	vacuums := func() (n int64) {
		if err := db.Gorm.Raw("SELECT vacuum_count FROM pg_stat_user_tables WHERE relid = to_regclass('outbox_events')").
			Scan(&n).Error; err != nil {
			t.Fatal(err)
		}
		return n
	}
	const interval = 20 * time.Millisecond
	// run runs a relay until it published five events, then calls during
	// while it still runs.
	run := func(db *store.DB, logger *slog.Logger, rec *recorder, during func()) {
		relay, err := outbox.NewRelay(db, rec, outbox.Config{VacuumInterval: interval, PollInterval: 10 * time.Millisecond, Logger: logger})
		if err != nil {
			t.Fatal(err)
		}
		if err := relay.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer relay.Stop()
		emit(t, db, "acme", "a1", 5)
		eventually(t, "the relay publishes", func() bool { return len(rec.got()) == 5 })
		during()
	}
	run(db, nil, &recorder{}, func() { eventually(t, "a vacuum of outbox_events", func() bool { return vacuums() > 0 }) })

	// A user who may write the outbox but does not own it.
	role := "outbox_writer_" + strings.ReplaceAll(uuid.NewString(), "-", "")[:12]
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	schema := u.Query().Get("search_path")
	if err := db.Gorm.Exec("CREATE ROLE " + role + " LOGIN").Error; err != nil {
		t.Skipf("this user may not create a role for the test: %v", err)
	}
	for _, q := range []string{"GRANT USAGE ON SCHEMA " + schema + " TO " + role,
		"GRANT ALL ON ALL TABLES IN SCHEMA " + schema + " TO " + role, "GRANT ALL ON ALL SEQUENCES IN SCHEMA " + schema + " TO " + role} {
		if err := db.Gorm.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		db.Gorm.Exec("DROP OWNED BY " + role)
		db.Gorm.Exec("DROP ROLE " + role)
	})
	u.User = url.User(role)
	other, err := store.Open(ctx, u.String(), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testlog.Buffer{}
	refusals := func() int { return strings.Count(logs.String(), "may not vacuum outbox_events") }
	rec := &recorder{}
	run(other, slog.New(slog.NewTextHandler(logs, nil)), rec, func() {
		eventually(t, "the refused vacuum's report", func() bool { return refusals() > 0 })
		// Past two vacuum intervals, the relay publishing five more events
		// has passed where it would vacuum again, had it not given up.
		time.Sleep(2 * interval)
		emit(t, other, "acme", "a2", 5)
		eventually(t, "the relay publishes again", func() bool { return len(rec.got()) == 10 })
	})
	_ = other.Close()
	if n := refusals(); n != 1 {
		t.Fatalf("%d reports of the refused vacuum, want 1:\n%s", n, logs.String())
	}
}

// eventually polls cond every 20ms until it holds or 30s passed.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); !cond(); time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

// TestMetricsWithoutTheDatabase: with the database gone, a scrape still
// succeeds with the relay's counters; only the gauges read from the
// database are left out.
func TestMetricsWithoutTheDatabase(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db := setup(t, dsn)
		reg := prometheus.NewRegistry()
		if _, err := outbox.NewRelay(db, outbox.PublisherFunc(func(context.Context, outbox.Event) error { return nil }),
			outbox.Config{Registerer: reg}); err != nil {
			t.Fatal(err)
		}
		names := func() map[string]bool {
			t.Helper()
			families, err := reg.Gather()
			if err != nil {
				t.Fatalf("gather: %v", err)
			}
			got := map[string]bool{}
			for _, f := range families {
				got[f.GetName()] = true
			}
			return got
		}
		if got := names(); !got["retrysafe_outbox_published_total"] || !got["retrysafe_outbox_lag_seconds"] {
			t.Fatalf("with the database: %v", got)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if got := names(); !got["retrysafe_outbox_published_total"] || got["retrysafe_outbox_lag_seconds"] || got["retrysafe_outbox_pending_events"] {
			t.Fatalf("without the database: %v", got)
		}
	})
}
