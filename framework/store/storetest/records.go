package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/recordsql"
)

// ShiftRecordClock makes the idempotency records of db read the database
// clock moved ahead by offset(), read at every statement, as if the
// database's clock ran that far ahead: a test moves it (with its engine's
// clock) to end leases, replay windows and TTLs instead of sleeping. It
// replaces db.Driver by a test driver: the same driver, whose records are
// its statements with the clock spelled moved ([store.Driver.Records]
// reads the database clock as it is); nothing else changes. Call it
// before anything is built on db.
func ShiftRecordClock(tb testing.TB, db *store.DB, offset func() time.Duration) {
	tb.Helper()
	d, ok := db.Driver.(recordsql.Respellable)
	if !ok {
		tb.Fatalf("storetest: the driver %q cannot move the clock of its records", db.Driver.Name())
	}
	db.Driver = d.WithRecordSpelling(func(s recordsql.Spelling) recordsql.Spelling {
		clock, duration := s.Clock, s.Duration
		s.Clock = func(shifts ...string) string { return clock(append([]string{"off"}, shifts...)...) }
		s.Bind = func(args map[string]any) { args["off"] = duration(offset()) }
		return s
	})
}

// testRecords runs the contract of the idempotency records' statements
// ([store.Driver.Records]) on the driver's migrations, through
// store.Open and on the application's own handle (store.New), the
// database clock moved by [ShiftRecordClock]: claims and their conflicts,
// takeovers, fencing, leases and expiry on the database clock, the stall
// cases (woken after a takeover, a release and re-claim, or the end of its
// own lease), the completion (with and without the last phase's recovery
// point), expiry and reclaim, the janitor, the operator's list, audit and
// published operations, lock timeouts and unclassified errors. The POST
// fallback's behaviour on top of them is fallback/postkeys', tested there.
func testRecords(t *testing.T, h Harness) {
	for _, handle := range []struct {
		name string
		open func(t *testing.T) *store.DB
	}{
		{"Open", func(t *testing.T) *store.DB { return open(t, h, store.Config{LockTimeout: 200 * time.Millisecond}) }},
		{"OwnGormDB", func(t *testing.T) *store.DB {
			db, err := store.New(context.Background(), h.Gorm(t), store.Config{LockTimeout: 200 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
	} {
		t.Run(handle.name, func(t *testing.T) {
			t.Parallel()
			for name, fn := range map[string]func(*testing.T, *recordsCase){
				"InsertClaimsAFreeKeyAndAHeldKeyIsLeftAlone":  recordsInsert,
				"ConcurrentInsertsOneWins":                    recordsConcurrentInsert,
				"TakeoverOnlyAfterTheLeaseAndOnlyOnce":        recordsTakeover,
				"WokenAfterTakeoverWritesNothing":             recordsFencedAfterTakeover,
				"WokenAfterReleaseAndReclaimWritesNothing":    recordsFencedAfterRelease,
				"WokenAfterItsOwnLeaseWritesNothing":          recordsFencedAfterOwnLease,
				"RenewKeepsTheLeaseLive":                      recordsRenew,
				"CompleteStoresTheOutcome":                    recordsComplete,
				"CompleteCanRecordTheLastPoint":               recordsCompleteWithPoint,
				"ExpiredRecordIsReclaimedLiveOneIsNot":        recordsReclaim,
				"JanitorDeletesOnlyExpiredCompletedInBatches": recordsJanitor,
				"FenceNeverRepeatsAfterTheJanitor":            recordsFenceAfterJanitor,
				"UnfinishedAndStats":                          recordsUnfinished,
				"ListFiltersOnTheDatabaseClock":               recordsList,
				"CountExpiredCountsWhatTheJanitorDeletes":     recordsCountExpired,
				"AuditWritesOneRow":                           recordsAudit,
				"OperationsArePublishedAndReplaced":           recordsOperations,
				"LockTimeoutIsClassified":                     recordsLockTimeout,
				"ErrorsPassThroughUnclassified":               recordsErrors,
				"ProductionStatementsOnTheDatabaseClock":      recordsProduction,
			} {
				t.Run(name, func(t *testing.T) {
					t.Parallel()
					db := handle.open(t)
					migrate(t, db)
					c := &recordsCase{t: t, db: db, ctx: context.Background()}
					c.production = db.Driver.Records()
					ShiftRecordClock(t, db, c.clock.offset)
					c.records = db.Driver.Records()
					fn(t, c)
				})
			}
		})
	}
}

// recordClock is how far a test moved the database clock.
type recordClock struct {
	mu  sync.Mutex
	off time.Duration
}

func (c *recordClock) offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.off
}

// recordsCase is one test's database, the driver's record statements on
// the moved clock, and the production ones.
type recordsCase struct {
	t   *testing.T
	db  *store.DB
	ctx context.Context
	// records read the database clock moved by clock; production reads it
	// as it is.
	records, production store.Records
	clock               recordClock
}

// advance moves the clock that c.records read forward by d.
func (c *recordsCase) advance(d time.Duration) {
	c.clock.mu.Lock()
	defer c.clock.mu.Unlock()
	c.clock.off += d
}

const (
	recordLease = 30 * time.Second
	recordTTL   = 24 * time.Hour
	// recordPointStarted is the recovery point of a fresh claim (the
	// caller's text; postkeys.PointStarted).
	recordPointStarted = "started"
)

func recordID(key string) store.RecordKey {
	return store.RecordKey{Tenant: "t1", Operation: "op", Key: key}
}

func recordClaimParams(key string) *store.RecordClaimParams {
	return &store.RecordClaimParams{ID: recordID(key), Fingerprint: "v1:fp-" + key, FingerprintVersion: 1,
		Point: recordPointStarted, Lease: recordLease, TTL: recordTTL}
}

// write runs fn in one transaction of the case's database.
func (c *recordsCase) write(fn func(tx *gorm.DB) error) error {
	return c.db.Write(c.ctx, fn)
}

func (c *recordsCase) insert(key string) store.RecordClaim {
	c.t.Helper()
	var (
		claim store.RecordClaim
		ok    bool
	)
	if err := c.write(func(tx *gorm.DB) (err error) {
		claim, ok, err = c.records.Insert(c.ctx, tx, recordClaimParams(key))
		return err
	}); err != nil || !ok {
		c.t.Fatalf("Insert(%s) = %v, %v", key, ok, err)
	}
	if claim.Fence <= 0 || claim.Attempt != 1 {
		c.t.Fatalf("Insert(%s) claim %+v, want a positive fence at attempt 1", key, claim)
	}
	return claim
}

func (c *recordsCase) get(key string) (store.RecordRow, bool) {
	c.t.Helper()
	rec, found, err := c.records.Get(c.ctx, c.db.Gorm, &store.RecordGetParams{ID: recordID(key)})
	if err != nil {
		c.t.Fatalf("Get(%s): %v", key, err)
	}
	return rec, found
}

func (c *recordsCase) mustGet(key string) store.RecordRow {
	c.t.Helper()
	rec, found := c.get(key)
	if !found {
		c.t.Fatalf("Get(%s): no record", key)
	}
	return rec
}

func (c *recordsCase) takeover(rec store.RecordRow) (store.RecordClaim, bool) {
	c.t.Helper()
	claim, ok, err := c.records.Takeover(c.ctx, c.db.Gorm, &store.RecordTakeoverParams{ID: rec.ID, Fence: rec.Fence,
		From: rec.State, Lease: recordLease})
	if err != nil {
		c.t.Fatalf("Takeover: %v", err)
	}
	return claim, ok
}

// location is the header text complete stores for key.
func recordLocation(key string) string { return `{"Location":["/x/` + key + `"]}` }

func (c *recordsCase) complete(key string, fence int64) bool {
	c.t.Helper()
	ok, err := c.records.Complete(c.ctx, c.db.Gorm, &store.RecordCompleteParams{ID: recordID(key), Fence: fence,
		RecordOutcome: store.RecordOutcome{Status: http.StatusCreated, Headers: recordLocation(key),
			Body: []byte(`{"k":"` + key + `"}`), Ref: "ref-" + key, TTL: time.Hour}})
	if err != nil {
		c.t.Fatalf("Complete: %v", err)
	}
	return ok
}

func (c *recordsCase) markUnknown(key string, fence int64, code string) {
	c.t.Helper()
	ok, err := c.records.MarkUnknown(c.ctx, c.db.Gorm, &store.RecordMarkUnknownParams{ID: recordID(key), Fence: fence, ErrorCode: code})
	if err != nil || !ok {
		c.t.Fatalf("MarkUnknown(%s) = %v, %v", key, ok, err)
	}
}

func (c *recordsCase) advancePoint(key string, fence int64, point, ref string) bool {
	c.t.Helper()
	ok, err := c.records.Advance(c.ctx, c.db.Gorm, &store.RecordAdvanceParams{ID: recordID(key), Fence: fence, Point: point,
		Ref: ref, Lease: recordLease})
	if err != nil {
		c.t.Fatalf("Advance: %v", err)
	}
	return ok
}

func (c *recordsCase) release(key string, fence int64) bool {
	c.t.Helper()
	ok, err := c.records.Release(c.ctx, c.db.Gorm, &store.RecordReleaseParams{ID: recordID(key), Fence: fence, Point: recordPointStarted})
	if err != nil {
		c.t.Fatalf("Release: %v", err)
	}
	return ok
}

func (c *recordsCase) deleteExpired(limit int) int64 {
	c.t.Helper()
	n, err := c.records.DeleteExpired(c.ctx, c.db.Gorm, &store.RecordDeleteExpiredParams{Limit: limit})
	if err != nil {
		c.t.Fatalf("DeleteExpired: %v", err)
	}
	return n
}

// attemptWrites tries every write of an attempt with fence and reports
// which applied.
func (c *recordsCase) attemptWrites(key string, fence int64) []string {
	c.t.Helper()
	var applied []string
	check := func(name string, ok bool, err error) {
		if err != nil {
			c.t.Fatalf("%s: %v", name, err)
		}
		if ok {
			applied = append(applied, name)
		}
	}
	check("Advance", c.advancePoint(key, fence, "phase1", "stale"), nil)
	ok, err := c.records.Renew(c.ctx, c.db.Gorm, &store.RecordRenewParams{ID: recordID(key), Fence: fence, Lease: recordLease})
	check("Renew", ok, err)
	ok, err = c.records.MarkUnknown(c.ctx, c.db.Gorm, &store.RecordMarkUnknownParams{ID: recordID(key), Fence: fence, ErrorCode: "x"})
	check("MarkUnknown", ok, err)
	check("Release", c.release(key, fence), nil)
	check("Complete", c.complete(key, fence), nil)
	return applied
}

func recordsInsert(t *testing.T, c *recordsCase) {
	claim := c.insert("k")
	rec := c.mustGet("k")
	if rec.State != store.RecordInProgress || rec.RecoveryPoint != recordPointStarted || rec.Fence != claim.Fence || rec.ID != recordID("k") ||
		rec.Attempt != 1 || rec.Fingerprint != "v1:fp-k" || rec.FingerprintVersion != 1 || rec.Expired || rec.LeaseExpired {
		t.Fatalf("claimed record %+v", rec)
	}
	if d := rec.LockedUntil.Sub(rec.CreatedAt); d < recordLease-time.Second || d > recordLease+time.Second {
		t.Fatalf("lease = %v, want %v from the claim", d, recordLease)
	}
	if d := rec.ExpiresAt.Sub(rec.CreatedAt); d < recordTTL-time.Second || d > recordTTL+time.Second {
		t.Fatalf("expiry = %v after the claim, want %v", d, recordTTL)
	}
	// A held key: no claim, and the record is exactly as it was.
	for _, held := range []bool{true, false} {
		if !held {
			c.complete("k", claim.Fence)
			rec = c.mustGet("k")
		}
		var ok bool
		other := recordClaimParams("k")
		other.Fingerprint = "v1:other"
		if err := c.write(func(tx *gorm.DB) (err error) {
			_, ok, err = c.records.Insert(c.ctx, tx, other)
			return err
		}); err != nil || ok {
			t.Fatalf("Insert on a held key = %v, %v", ok, err)
		}
		if after := c.mustGet("k"); !after.UpdatedAt.Equal(rec.UpdatedAt) || after.Fence != rec.Fence || after.Fingerprint != rec.Fingerprint {
			t.Fatalf("Insert on a held key changed it: %+v → %+v", rec, after)
		}
	}
	if _, found := c.get("other"); found {
		t.Fatal("Get found a record never claimed")
	}
}

func recordsConcurrentInsert(t *testing.T, c *recordsCase) {
	const n = 8
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		wins int
	)
	for range n {
		wg.Go(func() {
			var ok bool
			err := c.write(func(tx *gorm.DB) (err error) {
				_, ok, err = c.records.Insert(c.ctx, tx, recordClaimParams("k"))
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !errors.Is(err, store.ErrLockTimeout) {
				t.Errorf("Insert: %v", err)
			}
			if ok {
				wins++
			}
		})
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d of %d concurrent inserts claimed the key, want 1", wins, n)
	}
}

func recordsTakeover(t *testing.T, c *recordsCase) {
	first := c.insert("k")
	rec := c.mustGet("k")
	if _, ok := c.takeover(rec); ok {
		t.Fatal("took over a live lease")
	}
	c.advance(recordLease + time.Second)
	rec = c.mustGet("k")
	if !rec.LeaseExpired {
		t.Fatalf("lease not expired on the moved clock: %+v", rec)
	}
	stale := rec
	stale.Fence++
	if _, ok := c.takeover(stale); ok {
		t.Fatal("took over with a fence the record does not carry")
	}
	claim, ok := c.takeover(rec)
	if !ok || claim.Fence == first.Fence || claim.Fence <= 0 || claim.Attempt != 2 {
		t.Fatalf("takeover = %+v, %v; first claim %+v", claim, ok, first)
	}
	if _, ok := c.takeover(rec); ok {
		t.Fatal("a second taker with the same view also won")
	}
	after := c.mustGet("k")
	if after.Fence != claim.Fence || after.State != store.RecordInProgress || after.LeaseExpired {
		t.Fatalf("record after takeover %+v", after)
	}
	// An unknown record is taken over at once, lease or not.
	c.markUnknown("k", claim.Fence, "unavailable")
	unknown := c.mustGet("k")
	if unknown.State != store.RecordUnknown || unknown.ErrorCode != "unavailable" || !unknown.LockedUntil.IsZero() {
		t.Fatalf("unknown record %+v", unknown)
	}
	third, ok := c.takeover(unknown)
	if !ok || third.Fence == claim.Fence || third.Attempt != 3 {
		t.Fatalf("takeover of unknown = %+v, %v", third, ok)
	}
}

func recordsFencedAfterTakeover(t *testing.T, c *recordsCase) {
	first := c.insert("k")
	c.advance(recordLease + time.Second)
	claim, ok := c.takeover(c.mustGet("k"))
	if !ok {
		t.Fatal("no takeover")
	}
	before := c.mustGet("k")
	if applied := c.attemptWrites("k", first.Fence); len(applied) != 0 {
		t.Fatalf("the taken-over attempt's %v applied", applied)
	}
	if after := c.mustGet("k"); after.Fence != claim.Fence || !after.UpdatedAt.Equal(before.UpdatedAt) || after.RecoveryPoint != recordPointStarted {
		t.Fatalf("the stale attempt changed the record: %+v", after)
	}
}

func recordsFencedAfterRelease(t *testing.T, c *recordsCase) {
	first := c.insert("k")
	c.advance(recordLease + time.Second)
	claim, ok := c.takeover(c.mustGet("k"))
	if !ok {
		t.Fatal("no takeover")
	}
	if !c.release("k", claim.Fence) {
		t.Fatal("Release did not apply")
	}
	if _, found := c.get("k"); found {
		t.Fatal("a released key still has a record")
	}
	again := c.insert("k")
	if again.Fence == first.Fence || again.Fence == claim.Fence || again.Fence < claim.Fence {
		t.Fatalf("re-claim fence %d repeats or goes back (claims %d, %d)", again.Fence, first.Fence, claim.Fence)
	}
	before := c.mustGet("k")
	for _, stale := range []int64{first.Fence, claim.Fence} {
		if applied := c.attemptWrites("k", stale); len(applied) != 0 {
			t.Fatalf("fence %d: %v applied on the re-claimed record", stale, applied)
		}
	}
	if after := c.mustGet("k"); after.Fence != again.Fence || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a stale attempt changed the re-claimed record: %+v", after)
	}
	// A release needs the record still at its first recovery point.
	if !c.advancePoint("k", again.Fence, "phase1", "") {
		t.Fatal("Advance did not apply")
	}
	if c.release("k", again.Fence) {
		t.Fatal("Release past the first phase applied")
	}
}

func recordsFencedAfterOwnLease(t *testing.T, c *recordsCase) {
	claim := c.insert("k")
	before := c.mustGet("k")
	c.advance(recordLease + time.Second)
	if applied := c.attemptWrites("k", claim.Fence); len(applied) != 0 {
		t.Fatalf("writes %v applied after the attempt's own lease ended", applied)
	}
	if after := c.mustGet("k"); !after.UpdatedAt.Equal(before.UpdatedAt) || after.State != store.RecordInProgress {
		t.Fatalf("the record changed: %+v", after)
	}
}

func recordsRenew(t *testing.T, c *recordsCase) {
	claim := c.insert("k")
	c.advance(recordLease - 5*time.Second)
	if ok, err := c.records.Renew(c.ctx, c.db.Gorm, &store.RecordRenewParams{ID: recordID("k"), Fence: claim.Fence, Lease: recordLease}); err != nil || !ok {
		t.Fatalf("Renew = %v, %v", ok, err)
	}
	c.advance(10 * time.Second) // past the first lease, inside the renewed one
	if rec := c.mustGet("k"); rec.LeaseExpired {
		t.Fatalf("renewed lease expired: %+v", rec)
	}
	if !c.advancePoint("k", claim.Fence, "phase1", "r1") {
		t.Fatal("Advance did not apply")
	}
	if rec := c.mustGet("k"); rec.RecoveryPoint != "phase1" || rec.ResourceRef != "r1" {
		t.Fatalf("advanced record %+v", rec)
	}
	// An empty ref keeps the one recorded.
	if !c.advancePoint("k", claim.Fence, "phase2", "") {
		t.Fatal("Advance did not apply")
	}
	if rec := c.mustGet("k"); rec.RecoveryPoint != "phase2" || rec.ResourceRef != "r1" {
		t.Fatalf("advanced record %+v", rec)
	}
}

func recordsComplete(t *testing.T, c *recordsCase) {
	claim := c.insert("k")
	if !c.complete("k", claim.Fence) {
		t.Fatal("Complete did not apply")
	}
	rec := c.mustGet("k")
	if rec.State != store.RecordCompleted || rec.ResponseStatus != http.StatusCreated || string(rec.ResponseBody) != `{"k":"k"}` ||
		rec.ResponseHeaders != recordLocation("k") || rec.ResourceRef != "ref-k" || !rec.LockedUntil.IsZero() || rec.Truncated {
		t.Fatalf("completed record %+v", rec)
	}
	if d := rec.ExpiresAt.Sub(rec.UpdatedAt); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Fatalf("expires %v after completion, want 1h", d)
	}
	if c.complete("k", claim.Fence) {
		t.Fatal("a second completion applied")
	}
	big := c.insert("big")
	ok, err := c.records.Complete(c.ctx, c.db.Gorm, &store.RecordCompleteParams{ID: recordID("big"), Fence: big.Fence,
		RecordOutcome: store.RecordOutcome{Status: 402, Body: []byte("x"), Truncated: true, Ref: "ref-big", ErrorCode: "card_declined", TTL: time.Hour}})
	if err != nil || !ok {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	if rec := c.mustGet("big"); !rec.Truncated || rec.ResponseBody != nil || rec.ErrorCode != "card_declined" || rec.ResponseStatus != 402 {
		t.Fatalf("truncated record %+v", rec)
	}
}

// recordsCompleteWithPoint: a completion that names a recovery point
// records it with the outcome in one statement (the last phase and the
// stored response commit together); one that names none keeps the
// record's point. Fenced like every write of an attempt.
func recordsCompleteWithPoint(t *testing.T, c *recordsCase) {
	claim := c.insert("k")
	if !c.advancePoint("k", claim.Fence, "phase1", "r1") {
		t.Fatal("Advance did not apply")
	}
	complete := func(key string, fence int64, point string) bool {
		t.Helper()
		ok, err := c.records.Complete(c.ctx, c.db.Gorm, &store.RecordCompleteParams{ID: recordID(key), Fence: fence, Point: point,
			RecordOutcome: store.RecordOutcome{Status: http.StatusCreated, Body: []byte(`{}`), TTL: time.Hour}})
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		return ok
	}
	if complete("k", claim.Fence+1000, "phase2") {
		t.Fatal("a completion with another fence applied")
	}
	if rec := c.mustGet("k"); rec.State != store.RecordInProgress || rec.RecoveryPoint != "phase1" {
		t.Fatalf("record after a fenced completion %+v", rec)
	}
	if !complete("k", claim.Fence, "phase2") {
		t.Fatal("Complete with a point did not apply")
	}
	if rec := c.mustGet("k"); rec.State != store.RecordCompleted || rec.RecoveryPoint != "phase2" || rec.ResourceRef != "r1" ||
		rec.ResponseStatus != http.StatusCreated || !rec.LockedUntil.IsZero() {
		t.Fatalf("completed record %+v, want phase2 with the outcome", rec)
	}
	second := c.insert("k2")
	if !c.advancePoint("k2", second.Fence, "phase1", "") {
		t.Fatal("Advance did not apply")
	}
	if !complete("k2", second.Fence, "") {
		t.Fatal("Complete without a point did not apply")
	}
	if rec := c.mustGet("k2"); rec.State != store.RecordCompleted || rec.RecoveryPoint != "phase1" {
		t.Fatalf("completed record %+v, want its point kept", rec)
	}
}

func recordsReclaim(t *testing.T, c *recordsCase) {
	reclaim := func(key, fp string) (store.RecordClaim, bool) {
		t.Helper()
		var (
			claim store.RecordClaim
			ok    bool
		)
		p := recordClaimParams(key)
		p.Fingerprint = fp
		if err := c.write(func(tx *gorm.DB) (err error) {
			claim, ok, err = c.records.Reclaim(c.ctx, tx, p)
			return err
		}); err != nil {
			t.Fatalf("Reclaim: %v", err)
		}
		return claim, ok
	}
	first := c.insert("k")
	if _, ok := reclaim("k", "v1:new"); ok {
		t.Fatal("reclaimed an in-progress record")
	}
	c.complete("k", first.Fence)
	if _, ok := reclaim("k", "v1:new"); ok {
		t.Fatal("reclaimed a live completed record")
	}
	c.advance(time.Hour - 5*time.Second)
	if rec := c.mustGet("k"); rec.Expired {
		t.Fatalf("expired early: %+v", rec)
	}
	c.advance(10 * time.Second)
	if rec := c.mustGet("k"); !rec.Expired {
		t.Fatalf("not expired on the moved clock: %+v", rec)
	}
	claim, ok := reclaim("k", "v1:new")
	if !ok || claim.Fence == first.Fence || claim.Fence < first.Fence || claim.Attempt != 2 {
		t.Fatalf("reclaim = %+v, %v (first %+v)", claim, ok, first)
	}
	rec := c.mustGet("k")
	if rec.State != store.RecordInProgress || rec.Fingerprint != "v1:new" || rec.ResponseStatus != 0 || rec.ResponseBody != nil ||
		rec.ResponseHeaders != "" || rec.ResourceRef != "" || rec.Expired || rec.RecoveryPoint != recordPointStarted {
		t.Fatalf("reclaimed record %+v", rec)
	}
	// An absent key is claimed by Reclaim as well.
	if claim, ok := reclaim("absent", "v1:a"); !ok || claim.Attempt != 1 {
		t.Fatalf("reclaim of an absent key = %+v, %v", claim, ok)
	}
}

func recordsJanitor(t *testing.T, c *recordsCase) {
	for _, k := range []string{"c1", "c2", "c3"} {
		c.complete(k, c.insert(k).Fence)
	}
	c.insert("running")
	c.markUnknown("unknown", c.insert("unknown").Fence, "")
	if n := c.deleteExpired(10); n != 0 {
		t.Fatalf("DeleteExpired before expiry = %d", n)
	}
	c.advance(48 * time.Hour)
	var total []int64
	for {
		n := c.deleteExpired(2)
		total = append(total, n)
		if n < 2 {
			break
		}
	}
	if len(total) != 2 || total[0] != 2 || total[1] != 1 {
		t.Fatalf("batches deleted %v, want [2 1]", total)
	}
	for _, k := range []string{"running", "unknown"} {
		c.mustGet(k)
	}
}

func recordsFenceAfterJanitor(t *testing.T, c *recordsCase) {
	first := c.insert("k")
	c.complete("k", first.Fence)
	c.advance(2 * time.Hour)
	if n := c.deleteExpired(10); n != 1 {
		t.Fatalf("DeleteExpired = %d", n)
	}
	again := c.insert("k")
	if again.Fence <= first.Fence {
		t.Fatalf("fence after the janitor's delete = %d, first claim's %d: a token repeated or went back", again.Fence, first.Fence)
	}
	if applied := c.attemptWrites("k", first.Fence); len(applied) != 0 {
		t.Fatalf("the deleted record's attempt applied %v", applied)
	}
}

func recordsUnfinished(t *testing.T, c *recordsCase) {
	c.insert("old")
	c.advance(recordLease + time.Second)
	c.insert("live")
	c.markUnknown("unknown", c.insert("unknown").Fence, "")
	c.complete("done", c.insert("done").Fence)
	recs, err := c.records.ListUnfinished(c.ctx, c.db.Gorm, &store.RecordListUnfinishedParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]store.RecordState{}
	for _, r := range recs {
		got[r.ID.Key] = r.State
	}
	if len(got) != 2 || got["old"] != store.RecordInProgress || got["unknown"] != store.RecordUnknown {
		t.Fatalf("unfinished = %v, want old (lease expired) and unknown", got)
	}
	if recs, err := c.records.ListUnfinished(c.ctx, c.db.Gorm, &store.RecordListUnfinishedParams{Limit: 1}); err != nil || len(recs) != 1 {
		t.Fatalf("limit 1 = %d records, %v", len(recs), err)
	}
	stats, err := c.records.Stats(c.ctx, c.db.Gorm)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Unknown != 1 || stats.OldestInProgress < recordLease || stats.OldestInProgress > recordLease+10*time.Second {
		t.Fatalf("stats %+v, want 1 unknown and the oldest in progress about %v old", stats, recordLease+time.Second)
	}
}

func recordsLockTimeout(t *testing.T, c *recordsCase) {
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	rollback := errors.New("roll back")
	go func() {
		done <- c.write(func(tx *gorm.DB) error {
			if _, ok, err := c.records.Insert(c.ctx, tx, recordClaimParams("k")); err != nil || !ok {
				return errors.Join(err, errors.New("holder did not claim"))
			}
			close(held)
			<-release
			return rollback
		})
	}()
	<-held
	var ok bool
	err := c.write(func(tx *gorm.DB) (err error) {
		_, ok, err = c.records.Insert(c.ctx, tx, recordClaimParams("k"))
		return err
	})
	close(release)
	if herr := <-done; !errors.Is(herr, rollback) {
		t.Fatalf("holder: %v", herr)
	}
	if !errors.Is(err, store.ErrLockTimeout) || ok {
		t.Fatalf("Insert behind an uncommitted claim = %v, %v; want store.ErrLockTimeout", ok, err)
	}
	// The wait was for the key's own record (where the database says so:
	// not SQLite's database lock), which a request with the key holds.
	if !errors.Is(err, store.ErrBusy) && !errors.Is(err, store.ErrKeyLocked) {
		t.Fatalf("Insert behind an uncommitted claim = %v; want it marked store.ErrKeyLocked", err)
	}
	// The holder rolled back: the key is free.
	c.insert("k")
}

func recordsErrors(t *testing.T, c *recordsCase) {
	ctx, cancel := context.WithCancel(c.ctx)
	cancel()
	_, _, err := c.records.Get(ctx, c.db.Gorm, &store.RecordGetParams{ID: recordID("k")})
	if err == nil {
		t.Fatal("Get on a cancelled context succeeded")
	}
	if errors.Is(err, store.ErrLockTimeout) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("the store classified its error itself: %v", err)
	}
	if classified := c.db.Classify(err); errors.Is(classified, store.ErrLockTimeout) {
		t.Fatalf("a cancelled context classified as a lock timeout: %v", classified)
	}
}

func recordsList(t *testing.T, c *recordsCase) {
	c.insert("old")
	c.advance(time.Hour)
	c.complete("done", c.insert("done").Fence)
	c.markUnknown("unknown", c.insert("unknown").Fence, "")
	other := recordClaimParams("other")
	other.ID.Tenant = "t2"
	if err := c.write(func(tx *gorm.DB) error { _, _, err := c.records.Insert(c.ctx, tx, other); return err }); err != nil {
		t.Fatal(err)
	}
	keys := func(p store.RecordListParams) []string {
		t.Helper()
		p.Limit = max(p.Limit, 10)
		recs, err := c.records.List(c.ctx, c.db.Gorm, &p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.ID.Key)
		}
		return out
	}
	for _, tc := range []struct {
		p    store.RecordListParams
		want string
	}{
		{store.RecordListParams{}, "[old done unknown other]"},
		{store.RecordListParams{Tenant: "t1"}, "[old done unknown]"},
		{store.RecordListParams{State: store.RecordUnknown}, "[unknown]"},
		{store.RecordListParams{State: store.RecordInProgress}, "[old other]"},
		{store.RecordListParams{OlderThan: 30 * time.Minute}, "[old]"},
		{store.RecordListParams{Operation: "none"}, "[]"},
	} {
		if got := fmt.Sprint(keys(tc.p)); got != tc.want {
			t.Fatalf("List(%+v) = %s, want %s", tc.p, got, tc.want)
		}
	}
	recs, err := c.records.List(c.ctx, c.db.Gorm, &store.RecordListParams{Tenant: "t1", Limit: 1})
	if err != nil || len(recs) != 1 || recs[0].ID.Key != "old" || !recs[0].LeaseExpired {
		t.Fatalf("List limit 1 = %+v, %v: want old, its lease expired", recs, err)
	}
	for _, bad := range []store.RecordListParams{{}, {Limit: 10, OlderThan: -time.Second}} {
		if _, err := c.records.List(c.ctx, c.db.Gorm, &bad); err == nil {
			t.Fatalf("List(%+v) did not fail", bad)
		}
	}
}

func recordsCountExpired(t *testing.T, c *recordsCase) {
	c.complete("c1", c.insert("c1").Fence)
	c.complete("c2", c.insert("c2").Fence)
	c.insert("running")
	count := func() int64 {
		t.Helper()
		n, err := c.records.CountExpired(c.ctx, c.db.Gorm)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("CountExpired before expiry = %d", n)
	}
	c.advance(2 * time.Hour)
	if n := count(); n != 2 {
		t.Fatalf("CountExpired = %d, want 2", n)
	}
	if n := c.deleteExpired(10); n != 2 {
		t.Fatalf("DeleteExpired = %d", n)
	}
}

// recordsAudit: the audit row keeps what it is given of the key, its
// hash (the caller's, telemetry.KeyHash), stamped with the database
// clock.
func recordsAudit(t *testing.T, c *recordsCase) {
	claim := c.insert("k")
	sum := sha256.Sum256([]byte("k"))
	hash := hex.EncodeToString(sum[:])
	p := &store.RecordAuditParams{Tenant: "t1", Operation: "op", KeyHash: hash, Fence: claim.Fence, From: store.RecordUnknown,
		Outcome: "succeeded", Status: http.StatusCreated, Reference: "ch_1", Actor: "alice", Reason: "found"}
	if err := c.write(func(tx *gorm.DB) error { return c.records.Audit(c.ctx, tx, p) }); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		KeyHash   string
		Actor     string
		Fence     int64
		FromState string
		ErrorCode *string
	}
	if err := c.db.Gorm.Raw("SELECT key_hash, actor, fence, from_state, error_code FROM idempotency_resolutions WHERE tenant_id = 't1'").
		Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].KeyHash != hash || rows[0].Actor != "alice" || rows[0].Fence != claim.Fence ||
		rows[0].FromState != string(store.RecordUnknown) || rows[0].ErrorCode != nil {
		t.Fatalf("audit rows %+v, want one by the key's hash, with no error code", rows)
	}
}

func recordsOperations(t *testing.T, c *recordsCase) {
	get := func(name string) (store.RecordOperation, bool) {
		t.Helper()
		op, found, err := c.records.GetOperation(c.ctx, c.db.Gorm, name)
		if err != nil {
			t.Fatalf("GetOperation(%s): %v", name, err)
		}
		return op, found
	}
	put := func(op, codes string) {
		t.Helper()
		if err := c.write(func(tx *gorm.DB) error {
			return c.records.PutOperation(c.ctx, tx, &store.RecordOperation{Operation: op, Codes: codes})
		}); err != nil {
			t.Fatalf("PutOperation(%s): %v", op, err)
		}
	}
	if _, found := get("payments.create"); found {
		t.Fatal("an operation nobody published was found")
	}
	const declined = `[{"code":"card_declined","status":402}]`
	const both = `[{"code":"card_declined","status":402},{"code":"provider_busy","status":503}]`
	put("payments.create", declined)
	put("transfers", "[]")
	first, _ := get("payments.create")
	c.advance(time.Minute)
	put("payments.create", both)
	op, found := get("payments.create")
	if !found || op.Operation != "payments.create" || op.Codes != both || op.UpdatedAt.IsZero() || op.UpdatedAt.Before(first.UpdatedAt) {
		t.Fatalf("published operation %+v (found %v), want the last publication", op, found)
	}
	if op, found := get("transfers"); !found || op.Codes != "[]" {
		t.Fatalf("an operation without codes: %+v (found %v)", op, found)
	}
}

// recordsProduction: the driver's own records ([store.Driver.Records]),
// which read the database clock as it is whatever a test driver did to
// its copy, run every statement: a claim's lease and a completion's
// window run from the database's now, and the records of a moved clock
// see a record of the real one as the moved clock says.
func recordsProduction(t *testing.T, c *recordsCase) {
	p, ctx, gdb := c.production, c.ctx, c.db.Gorm
	must := func(what string, ok bool, err error) {
		t.Helper()
		if err != nil || !ok {
			t.Fatalf("%s = %v, %v", what, ok, err)
		}
	}
	refused := func(what string, ok bool, err error) {
		t.Helper()
		if err != nil || ok {
			t.Fatalf("%s = %v, %v; want refused", what, ok, err)
		}
	}
	get := func(key string) (store.RecordRow, bool) {
		t.Helper()
		rec, found, err := p.Get(ctx, gdb, &store.RecordGetParams{ID: recordID(key)})
		if err != nil {
			t.Fatalf("Get(%s): %v", key, err)
		}
		return rec, found
	}
	insert := func(key string) (store.RecordClaim, bool) {
		t.Helper()
		var (
			claim store.RecordClaim
			ok    bool
		)
		if err := c.write(func(tx *gorm.DB) (err error) { claim, ok, err = p.Insert(ctx, tx, recordClaimParams(key)); return err }); err != nil {
			t.Fatalf("Insert(%s): %v", key, err)
		}
		return claim, ok
	}

	before := readNow(t, c.db)
	claim, ok := insert("k")
	must("Insert", ok, nil)
	after := readNow(t, c.db)
	rec, found := get("k")
	// SQLite's times have milliseconds.
	if !found || rec.CreatedAt.Before(before.Truncate(time.Millisecond)) || rec.CreatedAt.After(after) {
		t.Fatalf("claimed at %v (found %v), not between the database's %v and %v", rec.CreatedAt, found, before, after)
	}
	if d := rec.LockedUntil.Sub(rec.CreatedAt); d != recordLease || rec.LeaseExpired {
		t.Fatalf("lease %v (expired %v), want %v from the database clock", d, rec.LeaseExpired, recordLease)
	}
	_, ok = insert("k")
	refused("Insert of a held key", ok, nil)
	var err error
	if err := c.write(func(tx *gorm.DB) (err error) { _, ok, err = p.Reclaim(ctx, tx, recordClaimParams("k")); return err }); err != nil {
		t.Fatal(err)
	}
	refused("Reclaim of a live record", ok, nil)
	_, ok, err = p.Takeover(ctx, gdb, &store.RecordTakeoverParams{ID: recordID("k"), Fence: claim.Fence, From: store.RecordInProgress, Lease: recordLease})
	refused("Takeover of a live lease", ok, err)
	ok, err = p.Advance(ctx, gdb, &store.RecordAdvanceParams{ID: recordID("k"), Fence: claim.Fence, Point: "phase1", Lease: recordLease})
	must("Advance", ok, err)
	ok, err = p.Renew(ctx, gdb, &store.RecordRenewParams{ID: recordID("k"), Fence: claim.Fence, Lease: recordLease})
	must("Renew", ok, err)
	ok, err = p.Complete(ctx, gdb, &store.RecordCompleteParams{ID: recordID("k"), Fence: claim.Fence, Point: "phase2",
		RecordOutcome: store.RecordOutcome{Status: http.StatusCreated, Headers: recordLocation("k"), Body: []byte(`{}`), TTL: time.Hour}})
	must("Complete", ok, err)
	if rec, _ = get("k"); rec.State != store.RecordCompleted || rec.ExpiresAt.Sub(rec.UpdatedAt) != time.Hour || rec.Expired {
		t.Fatalf("completed record %+v, want an hour's window from the database clock", rec)
	}
	n, err := p.CountExpired(ctx, gdb)
	if err != nil || n != 0 {
		t.Fatalf("CountExpired = %d, %v", n, err)
	}
	if n, err = p.DeleteExpired(ctx, gdb, &store.RecordDeleteExpiredParams{Limit: 10}); err != nil || n != 0 {
		t.Fatalf("DeleteExpired = %d, %v", n, err)
	}

	unknown, ok := insert("u")
	must("Insert", ok, nil)
	ok, err = p.MarkUnknown(ctx, gdb, &store.RecordMarkUnknownParams{ID: recordID("u"), Fence: unknown.Fence, ErrorCode: "unavailable"})
	must("MarkUnknown", ok, err)
	recs, err := p.ListUnfinished(ctx, gdb, &store.RecordListUnfinishedParams{Limit: 10})
	if err != nil || len(recs) != 1 || recs[0].ID.Key != "u" {
		t.Fatalf("ListUnfinished = %+v, %v; want u", recs, err)
	}
	stats, err := p.Stats(ctx, gdb)
	if err != nil || stats.Unknown != 1 || stats.OldestInProgress != 0 {
		t.Fatalf("Stats = %+v, %v; want one unknown, none in progress", stats, err)
	}
	taken, ok, err := p.Takeover(ctx, gdb, &store.RecordTakeoverParams{ID: recordID("u"), Fence: unknown.Fence, From: store.RecordUnknown, Lease: recordLease})
	must("Takeover of an unknown record", ok, err)
	ok, err = p.Release(ctx, gdb, &store.RecordReleaseParams{ID: recordID("u"), Fence: taken.Fence, Point: recordPointStarted})
	must("Release", ok, err)
	if _, found := get("u"); found {
		t.Fatal("a released record is still there")
	}
	_, ok = insert("s")
	must("Insert", ok, nil)
	if stats, err = p.Stats(ctx, gdb); err != nil || stats.Unknown != 0 || stats.OldestInProgress < 0 || stats.OldestInProgress > time.Minute {
		t.Fatalf("Stats = %+v, %v; want none unknown and a fresh claim in progress", stats, err)
	}
	list, err := p.List(ctx, gdb, &store.RecordListParams{State: store.RecordInProgress, Limit: 10})
	if err != nil || len(list) != 1 || list[0].ID.Key != "s" || list[0].LeaseExpired {
		t.Fatalf("List = %+v, %v; want s, its lease live", list, err)
	}
	if err := c.write(func(tx *gorm.DB) error {
		return p.Audit(ctx, tx, &store.RecordAuditParams{Tenant: "t1", Operation: "op", KeyHash: "h", Fence: taken.Fence,
			From: store.RecordUnknown, Outcome: "failed", Status: 402, ErrorCode: "card_declined", Actor: "alice", Reason: "r"})
	}); err != nil {
		t.Fatalf("Audit: %v", err)
	}
	if err := c.write(func(tx *gorm.DB) error {
		return p.PutOperation(ctx, tx, &store.RecordOperation{Operation: "op", Codes: "[]"})
	}); err != nil {
		t.Fatalf("PutOperation: %v", err)
	}
	if op, found, err := p.GetOperation(ctx, gdb, "op"); err != nil || !found || op.Codes != "[]" ||
		op.UpdatedAt.Before(before.Truncate(time.Millisecond)) {
		t.Fatalf("GetOperation = %+v, %v, %v", op, found, err)
	}

	c.advance(recordLease)
	if moved := c.mustGet("s"); !moved.LeaseExpired {
		t.Fatalf("on the clock moved past the lease, the record reads %+v", moved)
	}
}
