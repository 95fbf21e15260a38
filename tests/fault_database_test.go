package tests

import (
	"context"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/pgtemp"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestFaultDatabaseKilled runs a PostgreSQL of its own, kills it
// (pg_ctl stop -m immediate) under load and restarts it. While it is down
// the API answers 503 unavailable (with Retry-After), never another 5xx;
// once it is back the same process resumes without a restart, every
// operation converges on exactly one effect, and every write acknowledged
// with a 2xx is in the database.
func TestFaultDatabaseKilled(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t) // part of the PostgreSQL suite: skip without TEST_DATABASE_URL
	pg := pgtemp.Start(t)
	dsn := pg.CreateDatabase("retrysafe")
	proc := demoproc.Start(t, demoproc.Config{Bin: demoproc.Build(t), DSN: dsn,
		Args: append([]string{"-lease", "2s", "-recovery-interval", "200ms"}, keepEvents...)})
	n := faultScale(150, 600)
	w := newWorkload(n, "dbkill", 5)
	kills := faultScale(1, 3)

	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	tally := &faultTally{}
	var down atomic.Bool
	downTally := &faultTally{}
	// Each answer while the database is down is also counted apart.
	observe := &http.Client{Timeout: 20 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		res, err := http.DefaultTransport.RoundTrip(r)
		if down.Load() && err == nil {
			downTally.add(res.StatusCode, nil)
		}
		return res, err
	})}

	loadDone := make(chan struct{})
	var killer sync.WaitGroup
	killer.Go(func() {
		for k := range kills {
			// Kill once a share of the operations went through.
			for tally.finals() < (k+1)*n/(kills+2) {
				select {
				case <-loadDone:
					return
				case <-time.After(10 * time.Millisecond):
				}
			}
			down.Store(true)
			pg.Kill()
			time.Sleep(2 * time.Second)
			pg.Restart()
			down.Store(false)
		}
	})
	finals := runOps(ctx, t, w.ops, 8, observe, tally, proc.URL())
	close(loadDone)
	killer.Wait()

	db := openStore(t, dsn)
	w.wantFinals(t, finals)
	waitRecovered(t, db, 30*time.Second)
	w.wantEffects(t, db, finals)
	if got := downTally.count(503, 503); got == 0 {
		t.Fatalf("no 503 while the database was down (%s)", downTally)
	}
	if other := tally.count(500, 502) + tally.count(504, 599); other != 0 {
		t.Fatalf("%d 5xx answers other than 503 (%s)", other, tally)
	}
	t.Logf("database killed %d times: %d operations; while down %s; in all %s; 0 duplicates, 0 lost", kills, n, downTally, tally)
}

// roundTripFunc is an http.RoundTripper made of a function.
type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestFaultDatabasePartition puts a proxy between the demo and PostgreSQL
// and makes it hold every packet, as a silent partition does: nothing is
// refused, nothing answers. Requests of both patterns answer 503
// unavailable with Retry-After within the request deadline (10s by
// default), never hang; when the partition heals the same process serves
// again and every retried write has exactly one effect.
func TestFaultDatabasePartition(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t, "postgres") // skips without TEST_DATABASE_URL
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	proxy := startProxy(t, u.Host)
	u.Host = proxy.Addr()
	proc := demoproc.Start(t, demoproc.Config{Bin: demoproc.Build(t), DSN: u.String()})
	base := proc.URL()
	client := &http.Client{Timeout: time.Minute}

	// A warm pool: the partition catches connections already open.
	warm := faultOp{Method: http.MethodPut, Path: orderPath(uuid.New()), Token: tokenAcme, Body: orderBody(1, "1.00")}
	if r, err := warm.send(t.Context(), client, base); err != nil || r.Status != http.StatusCreated {
		t.Fatalf("before the partition: %v %d %s", err, r.Status, r.Body)
	}

	const deadline = 10 * time.Second // the demo's default request deadline
	const slack = 20 * time.Second    // scheduling on a loaded machine: the partition ends only after every answer
	ops := []faultOp{
		{Method: http.MethodPut, Path: orderPath(uuid.New()), Token: tokenAcme, Body: orderBody(2, "2.00")},
		{Method: http.MethodPost, Path: "/v1/payments", Token: tokenAcme, Key: "partition-pay", Body: paymentBody(4200, "pm_card_visa")},
		{Method: http.MethodPost, Path: "/v1/transfers", Token: tokenAcme, Key: "partition-tr", Body: transferBody("acc_a", "acc_b", 500, "EUR")},
		{Method: http.MethodGet, Path: warm.Path, Token: tokenAcme},
	}
	proxy.Hold()
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Go(func() {
			start := time.Now()
			r, err := op.send(t.Context(), client, base)
			took := time.Since(start)
			switch {
			case err != nil:
				t.Errorf("%s during the partition: no answer after %s: %v", op.name(), took.Round(time.Millisecond), err)
			case r.Status != http.StatusServiceUnavailable || r.Header.Get("Retry-After") == "":
				t.Errorf("%s during the partition: %d (Retry-After %q) after %s, want 503 + Retry-After: %s", op.name(), r.Status, r.Header.Get("Retry-After"), took.Round(time.Millisecond), r.Body)
			case took > deadline+slack:
				t.Errorf("%s during the partition: 503 after %s, want within the %s deadline", op.name(), took.Round(time.Millisecond), deadline)
			}
		})
	}
	wg.Wait()
	proxy.Release()

	// The same process serves again; the writes converge once.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	tally := &faultTally{}
	finals := runOps(ctx, t, ops[:3], 3, client, tally, base)
	for _, r := range finals {
		wantStatus(t, r, http.StatusCreated)
	}
	db := openStore(t, dsn)
	for table, want := range map[string]int64{"orders": 2, "payments": 1, "sandbox_charges": 1, "transfers": 1} {
		var n int64
		if err := db.Table(table).Count(&n).Error; err != nil || n != want {
			t.Fatalf("%s: %d rows (%v), want %d", table, n, err, want)
		}
	}
}
