package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/pgha"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"gorm.io/gorm"
)

// TestFaultFailover runs the demo on a pg_auto_failover formation (a
// primary with a synchronous standby, internal/pgha) through the
// multi-host DSN, under a mixed load of orders (PUT), payments (phased
// POST) and transfers (local POST) whose clients retry every operation
// with its ID or key until a final answer, and fails the primary over
// three times (six with RETRYSAFE_FAULTS_LONG=1): the operator's
// failover, the primary's postmaster killed with its keeper, and the
// primary stopped while a payment is held between its provider charge and
// its recording. The same processes follow the primary; nothing restarts
// them. Expect: every operation answered 201 (402 for declines) once and
// replayed byte for byte afterwards; on the final primary exactly one
// effect each (no charge twice at the sandbox, no transfer applied
// twice, no acknowledged write lost); during a switch only 503
// unavailable with Retry-After, never another 5xx; and once the recovery
// worker ran, no record left in_progress or unknown. The time from each
// fault to the first write acknowledged after it is logged, with the
// answers seen meanwhile.
func TestFaultFailover(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(t.Context(), time.Duration(faultScale(6, 15))*time.Minute)
	defer cancel()
	h := startHALoad(ctx, t, faultScale(4, 8))
	f, dsn, seen, tally, load := h.f, h.dsn, h.seen, h.tally, h.load
	// A second process holds each payment 6s after its charge: the third
	// switch stops the primary while one is held there.
	held := demoproc.Start(t, demoproc.Config{Bin: h.bin, DSN: dsn, Args: append(h.args, "-pause-at", "after_charge=6s")})

	kinds := []string{"perform failover", "kill primary", "stop primary mid-payment"}
	if faultScale(1, 2) == 2 {
		kinds = append(kinds, kinds...)
	}
	var switches []switchReport
	for i, kind := range kinds {
		// Each switch starts under load, from a synchronous pair.
		load.waitFinals(ctx, t, tally.finals()+faultScale(100, 400))
		rep := switchReport{kind: kind, opsBefore: tally.finals(), from: f.Primary()}
		var heldPay *heldPayment
		switch kind {
		case "perform failover":
			// The old primary serves until it is demoted: the switch
			// is over for the clients at the first write after the
			// first failure, if anything failed.
			rep.at = time.Now()
			f.PerformFailover()
			rep.firstWrite = rep.at
			if failed := seen.firstFailure(rep.at); !failed.IsZero() {
				rep.firstWrite = seen.writeSentAfter(ctx, t, failed)
			}
		case "kill primary":
			// Once the kill returned, only a new primary takes writes.
			rep.at = time.Now()
			rep.node = f.KillPrimary()
			rep.firstWrite = seen.writeSentAfter(ctx, t, time.Now())
		case "stop primary mid-payment":
			heldPay = holdPayment(ctx, t, held, seen.observe(http.DefaultTransport), fmt.Sprintf("failover-held-%d", i))
			rep.at = time.Now()
			rep.node = f.StopPrimary()
			if heldPay.answered() {
				t.Fatal("the held payment was answered before the primary was stopped: the stop missed the window between charge and recording")
			}
			rep.firstWrite = seen.writeSentAfter(ctx, t, time.Now())
		}
		if rep.to = f.Primary(); rep.to == rep.from {
			t.Fatalf("%s: %s is still the primary", kind, rep.from.Name)
		}
		if rep.node.Name != "" {
			// Only now: a node restarted before the monitor promoted
			// the standby comes back as the primary it was, and
			// pg_auto_failover may then fail it over anyway and
			// rewind it (NOTES of the failover test, docs/scaling.md).
			f.Rejoin(rep.node)
		}
		f.WaitReplicated()
		rep.replicated = time.Now()
		if heldPay != nil {
			heldPay.wait(t)
			rep.note = heldPay.check(t, openStore(t, dsn))
		}
		rep.answers = seen.between(rep.at, rep.firstWrite)
		switches = append(switches, rep)
	}
	load.waitFinals(ctx, t, tally.finals()+faultScale(100, 400))
	// Every answer the clients took for final replays byte for byte on the
	// final primary.
	w := h.stop(ctx, t, switches, true, 1)
	var b strings.Builder
	fmt.Fprintf(&b, "%d switches, %d operations (%d orders, %d payments, %d transfers), 0 duplicates, 0 lost; %s\n",
		len(switches), len(w.ops), len(w.orders), w.payments, w.transfers, tally)
	fmt.Fprintf(&b, "| # | switch | primary | ops before | time to first write | synchronous again after | answers from the fault to the first write | note |\n|---|---|---|---|---|---|---|---|\n")
	for i, s := range switches {
		fmt.Fprintf(&b, "| %d | %s | %s → %s | %d | %s | %s | %s | %s |\n", i+1, s.kind, s.from.Name, s.to.Name, s.opsBefore,
			s.firstWrite.Sub(s.at).Round(10*time.Millisecond), s.replicated.Sub(s.at).Round(100*time.Millisecond), s.answers, s.note)
	}
	fmt.Fprintf(&b, "all 5xx: %s", seen.fiveXX())
	t.Log("failover:\n" + b.String())
}

// haLoad is the mixed load of the formation tests (TestFaultFailover,
// TestFaultSoak): one demo process on a pg_auto_failover formation, and
// clients that send orders (PUT), payments (phased POST) and transfers
// (local POST), each retried with its ID or key until a final answer.
type haLoad struct {
	f    *pgha.Formation
	dsn  string
	bin  string   // the demo, built
	args []string // the demo's flags
	proc *demoproc.Process

	seen    *answers // every answer, as the clients saw it
	client  *http.Client
	tally   *faultTally
	load    *continuousLoad
	workers sync.WaitGroup
}

// startHALoad starts the formation, the demo process and clients workers
// of load until [haLoad.stop]; the formation's and the process's logs are
// shown if t fails. It skips without TEST_DATABASE_URL.
func startHALoad(ctx context.Context, t *testing.T, clients int) *haLoad {
	testdb.Postgres(t) // part of the PostgreSQL suite: skip without TEST_DATABASE_URL
	h := &haLoad{f: pgha.Start(t, pgha.Config{}), bin: demoproc.Build(t),
		args: append([]string{"-lease", "2s", "-recovery-interval", "200ms"}, keepEvents...)}
	h.dsn = h.f.DSN()
	h.proc = demoproc.Start(t, demoproc.Config{Bin: h.bin, DSN: h.dsn, Args: h.args})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("formation:\n%s\ndemo:\n%s", h.f.Log(), h.proc.Log())
		}
	})
	h.seen = &answers{}
	h.client = &http.Client{Timeout: 20 * time.Second, Transport: h.seen.observe(http.DefaultTransport)}
	h.tally = &faultTally{}
	h.load = &continuousLoad{stop: make(chan struct{})}
	for range clients {
		h.workers.Go(func() { h.load.work(ctx, h.client, h.tally, h.proc.URL()) })
	}
	return h
}

// stop ends the load once the chunks begun are done and checks the
// outcome on the final primary: every operation got its final answer and
// had exactly one effect, none lost (ackedRows: each 201 is also checked
// against a committed row by wantEffects, beside wantAcked's check in
// chunks); after the recovery worker ran, no record is left in_progress or
// unknown; every step-th operation replays byte for byte; and no 5xx other
// than 503 unavailable with Retry-After was seen. It returns the workload
// sent.
func (h *haLoad) stop(ctx context.Context, t *testing.T, switches []switchReport, ackedRows bool, step int) *workload {
	t.Helper()
	close(h.load.stop)
	h.workers.Wait()
	if err := h.load.err(); err != nil {
		t.Fatalf("operations without a final answer: %v (%s)", err, h.tally)
	}
	db := openStore(t, h.dsn)
	w, finals := h.load.w, h.load.finals
	w.wantFinals(t, finals)
	waitRecovered(t, db, 30*time.Second)
	wantAcked(t, db, w.ops, finals, h.load.at, switches)
	var acked []response
	if ackedRows {
		acked = finals
	}
	w.wantEffects(t, db, acked)
	var again []faultOp
	var want []response
	for i := 0; i < len(w.ops); i += step {
		again, want = append(again, w.ops[i]), append(want, finals[i])
	}
	for i, r := range runOps(ctx, t, again, 8, h.client, &faultTally{}, h.proc.URL()) {
		wantReplay(t, r, want[i])
	}
	if bad := h.seen.bad(); len(bad) > 0 {
		t.Fatalf("answers other than 503 unavailable with Retry-After among the 5xx:\n%s", strings.Join(bad, "\n"))
	}
	return w
}

// wantAcked checks row by row that every operation answered 201 is on
// the final primary as its answer describes it, and names those that are
// not with the time of their answer and of the switches. It reads the rows
// in chunks of ids: a soak acknowledges hundreds of thousands.
func wantAcked(t *testing.T, db *gorm.DB, ops []faultOp, finals []response, at []time.Time, switches []switchReport) {
	t.Helper()
	type acked struct {
		i    int
		want string // what the row must say: the version, or the charge
	}
	byTable := map[string]map[string]acked{"orders": {}, "payments": {}, "transfers": {}}
	for i, r := range finals {
		if r.Status != http.StatusCreated {
			continue
		}
		var v struct {
			ID               string `json:"id"`
			Version          int64  `json:"version"`
			ProviderChargeID string `json:"provider_charge_id"`
		}
		if err := json.Unmarshal(r.Body, &v); err != nil {
			t.Fatalf("%s: %v: %s", ops[i].name(), err, r.Body)
		}
		switch {
		case strings.HasPrefix(v.ID, "pay_"):
			byTable["payments"][v.ID] = acked{i, v.ProviderChargeID + " succeeded"}
		case strings.HasPrefix(v.ID, "tr_"):
			byTable["transfers"][v.ID] = acked{i, ""}
		default:
			byTable["orders"][v.ID] = acked{i, fmt.Sprint(v.Version)}
		}
	}
	columns := map[string]string{
		"orders":    "id, CAST(version AS TEXT) AS got",
		"payments":  "id, provider_charge_id || ' ' || status AS got",
		"transfers": "id, '' AS got",
	}
	var lost []string
	for table, want := range byTable {
		ids := make([]string, 0, len(want))
		for id := range want {
			ids = append(ids, id)
		}
		found := map[string]string{}
		for chunk := range slices.Chunk(ids, 5000) {
			var rows []struct{ ID, Got string }
			if err := db.Table(table).Select(columns[table]).Where("tenant_id = ? AND id IN ?", "acme", chunk).Scan(&rows).Error; err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				found[r.ID] = r.Got
			}
		}
		for id, a := range want {
			if got, ok := found[id]; !ok || got != a.want {
				r := finals[a.i]
				lost = append(lost, fmt.Sprintf("%s answered %s (replayed %q; row %q, want %q): %s", ops[a.i].name(), at[a.i].Format("15:04:05.000"),
					r.Header.Get("Idempotent-Replayed"), got, a.want, r.Body))
			}
		}
	}
	if len(lost) > 0 {
		var sw []string
		for _, s := range switches {
			sw = append(sw, fmt.Sprintf("%s at %s, first write %s", s.kind, s.at.Format("15:04:05.000"), s.firstWrite.Format("15:04:05.000")))
		}
		t.Fatalf("%d acknowledged operations are not on the final primary:\n%s\nswitches:\n%s", len(lost), strings.Join(lost, "\n"), strings.Join(sw, "\n"))
	}
}

// switchReport is one switch of [TestFaultFailover].
type switchReport struct {
	kind           string
	node           pgha.Node // the node killed or stopped, to rejoin
	from, to       pgha.Node // the primary before and after
	at, firstWrite time.Time
	replicated     time.Time // synchronous again, after the rejoin
	opsBefore      int
	answers        string
	note           string
}

// continuousLoad runs the operations of a growing workload until stop
// closes: a worker takes the next operation (a new chunk of mixed
// operations when all are taken) and sends it until its final answer; once
// stop is closed, the chunk begun is finished and no other begins.
type continuousLoad struct {
	stop chan struct{}

	mu       sync.Mutex
	w        *workload
	finals   []response
	at       []time.Time // when each final answer came
	errs     []error
	chunks   int
	next     int
	answered int           // operations with their final answer
	done     chan struct{} // closed and renewed on every final answer
}

func (l *continuousLoad) take() (int, faultOp, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w == nil || l.next == len(l.w.ops) {
		// Stop between chunks: every operation of a chunk is sent, so
		// that the workload's expected effects are those of the chunks.
		select {
		case <-l.stop:
			return 0, faultOp{}, false
		default:
		}
		chunk := newWorkload(30, fmt.Sprintf("fo%d", l.chunks), uint64(100+l.chunks))
		l.chunks++
		if l.w == nil {
			l.w = chunk
		} else {
			l.w.merge(chunk)
		}
		l.finals = append(l.finals, make([]response, len(chunk.ops))...)
		l.at = append(l.at, make([]time.Time, len(chunk.ops))...)
	}
	i := l.next
	l.next++
	return i, l.w.ops[i], true
}

func (l *continuousLoad) work(ctx context.Context, client *http.Client, tally *faultTally, base string) {
	for {
		i, op, ok := l.take()
		if !ok {
			return
		}
		r, err := op.untilFinal(ctx, client, tally, base)
		l.mu.Lock()
		l.finals[i], l.at[i] = r, time.Now()
		l.answered++
		if err != nil {
			l.errs = append(l.errs, err)
		}
		if l.done != nil {
			close(l.done)
			l.done = nil
		}
		l.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func (l *continuousLoad) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return errors.Join(l.errs...)
}

// waitFinals waits until n operations have their final answer.
func (l *continuousLoad) waitFinals(ctx context.Context, t *testing.T, n int) {
	t.Helper()
	for {
		l.mu.Lock()
		got := l.answered
		if len(l.errs) > 0 {
			l.mu.Unlock()
			t.Fatalf("load: %v", errors.Join(l.errs...))
		}
		if l.done == nil {
			l.done = make(chan struct{})
		}
		done := l.done
		l.mu.Unlock()
		if got >= n {
			return
		}
		select {
		case <-done:
		case <-ctx.Done():
			t.Fatalf("load: %d final answers, want %d: %v", got, n, ctx.Err())
		}
	}
}

// merge adds o's operations and expected effects to w.
func (w *workload) merge(o *workload) {
	w.ops = append(w.ops, o.ops...)
	w.orders = append(w.orders, o.orders...)
	w.payments += o.payments
	w.declined += o.declined
	w.transfers += o.transfers
	for k, v := range o.balances {
		w.balances[k] += v
	}
}

// answers records every answer the clients of a fault test got, with the
// time its request was sent.
type answers struct {
	mu  sync.Mutex
	all []answer
}

type answer struct {
	sent, done  time.Time
	method      string
	status      int
	code        string
	retryAfter  bool
	transportOK bool
}

func (a *answers) observe(next http.RoundTripper) http.RoundTripper {
	return roundTripFunc(func(r *http.Request) (*http.Response, error) {
		sent := time.Now()
		res, err := next.RoundTrip(r)
		an := answer{sent: sent, done: time.Now(), method: r.Method, transportOK: err == nil}
		if err == nil {
			an.status, an.retryAfter = res.StatusCode, res.Header.Get("Retry-After") != ""
			if res.StatusCode >= 500 {
				// Read the problem's code, and give the body back.
				body, rerr := io.ReadAll(res.Body)
				res.Body.Close()
				var p struct {
					Code string `json:"code"`
				}
				_ = json.Unmarshal(body, &p)
				an.code = p.Code
				res.Body = io.NopCloser(bytes.NewReader(body))
				if rerr != nil {
					an.transportOK = false
				}
			}
		}
		a.mu.Lock()
		a.all = append(a.all, an)
		a.mu.Unlock()
		return res, err
	})
}

// writeSentAfter waits until a write sent after from was answered 2xx
// and returns the time of the first such answer.
func (a *answers) writeSentAfter(ctx context.Context, t *testing.T, from time.Time) time.Time {
	t.Helper()
	for {
		if first := a.firstWrite(from); !first.IsZero() {
			return first
		}
		select {
		case <-ctx.Done():
			t.Fatalf("no write sent after %s succeeded: %v", from.Format(time.TimeOnly), ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// firstWrite returns when the first write sent after from was answered
// 2xx, zero if none was yet.
func (a *answers) firstWrite(from time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var first time.Time
	for _, an := range a.all {
		if an.method != http.MethodGet && an.sent.After(from) && an.transportOK && an.status >= 200 && an.status < 300 &&
			(first.IsZero() || an.done.Before(first)) {
			first = an.done
		}
	}
	return first
}

// firstFailure returns when the first request sent at or after at was
// sent that got a 5xx or no answer, zero if none did.
func (a *answers) firstFailure(at time.Time) time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	var failed time.Time
	for _, an := range a.all {
		if !an.sent.Before(at) && (!an.transportOK || an.status >= 500) && (failed.IsZero() || an.sent.Before(failed)) {
			failed = an.sent
		}
	}
	return failed
}

// between summarizes the answers to requests sent in [from, to): counts
// by status (and code for 5xx), and those with no answer.
func (a *answers) between(from, to time.Time) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	counts := map[string]int{}
	for _, an := range a.all {
		if an.sent.Before(from) || !an.sent.Before(to) {
			continue
		}
		counts[an.key()]++
	}
	return summarize(counts)
}

func (an answer) key() string {
	switch {
	case !an.transportOK:
		return "no answer"
	case an.status >= 500:
		return fmt.Sprintf("%d %s", an.status, an.code)
	}
	return fmt.Sprint(an.status)
}

// fiveXX counts every 5xx answer by status and code.
func (a *answers) fiveXX() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	counts := map[string]int{}
	for _, an := range a.all {
		if an.transportOK && an.status >= 500 {
			counts[an.key()]++
		}
	}
	return summarize(counts)
}

// bad lists the 5xx answers that are not 503 unavailable with Retry-After.
func (a *answers) bad() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	for _, an := range a.all {
		if an.transportOK && an.status >= 500 && (an.status != http.StatusServiceUnavailable || an.code != "unavailable" || !an.retryAfter) {
			out = append(out, fmt.Sprintf("%s %s: %s (Retry-After %v)", an.sent.Format(time.TimeOnly), an.method, an.key(), an.retryAfter))
		}
	}
	return out
}

func summarize(counts map[string]int) string {
	if len(counts) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(counts))
	for k := range counts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s: %d", k, counts[k])
	}
	return strings.Join(parts, ", ")
}

// heldPayment is a payment of tenant globex sent to a process that holds
// it after its charge, retried until its final answer.
type heldPayment struct {
	op       faultOp
	first    chan struct{} // closed when the first attempt is answered
	done     chan struct{}
	final    response
	err      error
	attempts int
	seen     []string // the answer to each attempt
}

// holdPayment sends the payment and returns once the process holds it
// between the provider's charge and its recording (the hold line on its
// stdout).
func holdPayment(ctx context.Context, t *testing.T, p *demoproc.Process, transport http.RoundTripper, key string) *heldPayment {
	t.Helper()
	h := &heldPayment{op: faultOp{Method: http.MethodPost, Path: "/v1/payments", Token: tokenGlobex, Key: key, Body: paymentBody(4242, "pm_card_visa")},
		first: make(chan struct{}), done: make(chan struct{})}
	var once sync.Once
	client := &http.Client{Timeout: 30 * time.Second, Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		res, err := transport.RoundTrip(r)
		once.Do(func() { close(h.first) })
		h.attempts++
		switch {
		case err != nil:
			h.seen = append(h.seen, "no answer")
		case res.StatusCode == http.StatusCreated:
			h.seen = append(h.seen, "201")
		default:
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			res.Body = io.NopCloser(bytes.NewReader(body))
			var p struct {
				Code string `json:"code"`
			}
			_ = json.Unmarshal(body, &p)
			h.seen = append(h.seen, fmt.Sprintf("%d %s", res.StatusCode, p.Code))
		}
		return res, err
	})}
	for drained := false; !drained; {
		select {
		case <-p.Lines():
		default:
			drained = true
		}
	}
	go func() {
		defer close(h.done)
		h.final, h.err = h.op.untilFinal(ctx, client, &faultTally{}, p.URL())
	}()
	select {
	case line := <-p.Lines():
		if !strings.Contains(line, "after_charge") {
			t.Fatalf("held process printed %q, want its hold after the charge", line)
		}
	case <-h.done:
		t.Fatalf("the payment was answered before its hold: %v %d %s", h.err, h.final.Status, h.final.Body)
	case <-time.After(30 * time.Second):
		t.Fatal("the held process did not reach its hold after the charge")
	}
	return h
}

func (h *heldPayment) answered() bool {
	select {
	case <-h.first:
		return true
	default:
		return false
	}
}

func (h *heldPayment) wait(t *testing.T) {
	t.Helper()
	<-h.done
	if h.err != nil {
		t.Fatalf("held payment: %v", h.err)
	}
	wantStatus(t, h.final, http.StatusCreated)
}

// check verifies that the held payment was charged once at the sandbox
// and recorded with that charge, and returns what its client saw.
func (h *heldPayment) check(t *testing.T, db *gorm.DB) string {
	t.Helper()
	var v struct {
		ID               string `json:"id"`
		ProviderChargeID string `json:"provider_charge_id"`
	}
	if err := json.Unmarshal(h.final.Body, &v); err != nil {
		t.Fatalf("held payment: %v: %s", err, h.final.Body)
	}
	var charges, recorded int64
	if err := db.Table("sandbox_charges c").Joins("JOIN payments p ON p.tenant_id = c.tenant_id AND p.downstream_key = c.downstream_key").
		Where("p.tenant_id = ? AND p.id = ?", "globex", v.ID).Count(&charges).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Table("payments").Where("tenant_id = ? AND id = ? AND provider_charge_id = ? AND status = ?", "globex", v.ID, v.ProviderChargeID, "succeeded").
		Count(&recorded).Error; err != nil {
		t.Fatal(err)
	}
	if charges != 1 || recorded != 1 {
		t.Fatalf("held payment %s: %d sandbox charges, %d succeeded payments with charge %s; want 1 and 1", v.ID, charges, recorded, v.ProviderChargeID)
	}
	return fmt.Sprintf("held payment charged once; its %d attempts, the first answered after the stop: %s", h.attempts, strings.Join(h.seen, ", "))
}
