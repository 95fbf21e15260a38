package recordstoretest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"
	"time"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

// Harness is one record store under test.
type Harness struct {
	// DB is the database, with the framework's migrations applied and no
	// record in it. Its lock timeout should be short (about 200ms).
	DB *store.DB
	// Store is the implementation under test.
	Store postkeys.RecordStore
	// Advance moves the clock that Store reads forward by d.
	Advance func(d time.Duration)
}

const (
	lease = 30 * time.Second
	ttl   = 24 * time.Hour
)

// Run runs the contract suite, each case in parallel on a harness of its
// own from newHarness.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	t.Helper()
	for name, fn := range map[string]func(*testing.T, *suite){
		"InsertClaimsAFreeKeyAndAHeldKeyIsLeftAlone":  testInsert,
		"ConcurrentInsertsOneWins":                    testConcurrentInsert,
		"TakeoverOnlyAfterTheLeaseAndOnlyOnce":        testTakeover,
		"WokenAfterTakeoverWritesNothing":             testFencedAfterTakeover,
		"WokenAfterReleaseAndReclaimWritesNothing":    testFencedAfterRelease,
		"WokenAfterItsOwnLeaseWritesNothing":          testFencedAfterOwnLease,
		"RenewKeepsTheLeaseLive":                      testRenew,
		"CompleteStoresTheOutcome":                    testComplete,
		"CompleteCanRecordTheLastPoint":               testCompleteWithPoint,
		"ExpiredRecordIsReclaimedLiveOneIsNot":        testReclaim,
		"JanitorDeletesOnlyExpiredCompletedInBatches": testJanitor,
		"FenceNeverRepeatsAfterTheJanitor":            testFenceAfterJanitor,
		"UnfinishedAndStats":                          testUnfinished,
		"ListFiltersOnTheDatabaseClock":               testList,
		"CountExpiredCountsWhatTheJanitorDeletes":     testCountExpired,
		"AuditWritesOneRowByTheKeysHash":              testAudit,
		"OperationsArePublishedAndReplaced":           testOperations,
		"LockTimeoutIsClassified":                     testLockTimeout,
		"ErrorsPassThroughUnclassified":               testErrors,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			h := newHarness(t)
			fn(t, &suite{t: t, h: h, ctx: context.Background()})
		})
	}
}

type suite struct {
	t   *testing.T
	h   Harness
	ctx context.Context
}

func id(key string) postkeys.RecordID {
	return postkeys.RecordID{Tenant: "t1", Operation: "op", Key: key}
}

func claimParams(key string) postkeys.ClaimParams {
	return postkeys.ClaimParams{ID: id(key), Fingerprint: "v1:fp-" + key, FingerprintVersion: 1, Lease: lease, TTL: ttl}
}

// write runs fn in one transaction of the harness's database.
func (s *suite) write(fn func(tx *gorm.DB) error) error {
	return s.h.DB.Write(s.ctx, fn)
}

func (s *suite) insert(key string) postkeys.Claim {
	s.t.Helper()
	var (
		c  postkeys.Claim
		ok bool
	)
	if err := s.write(func(tx *gorm.DB) (err error) {
		c, ok, err = s.h.Store.Insert(s.ctx, tx, claimParams(key))
		return err
	}); err != nil || !ok {
		s.t.Fatalf("Insert(%s) = %v, %v", key, ok, err)
	}
	if c.Fence <= 0 || c.Attempt != 1 {
		s.t.Fatalf("Insert(%s) claim %+v, want a positive fence at attempt 1", key, c)
	}
	return c
}

func (s *suite) get(key string) (postkeys.Record, bool) {
	s.t.Helper()
	rec, found, err := s.h.Store.Get(s.ctx, s.h.DB.Gorm, id(key))
	if err != nil {
		s.t.Fatalf("Get(%s): %v", key, err)
	}
	return rec, found
}

func (s *suite) mustGet(key string) postkeys.Record {
	s.t.Helper()
	rec, found := s.get(key)
	if !found {
		s.t.Fatalf("Get(%s): no record", key)
	}
	return rec
}

func (s *suite) takeover(rec postkeys.Record) (postkeys.Claim, bool) {
	s.t.Helper()
	c, ok, err := s.h.Store.Takeover(s.ctx, s.h.DB.Gorm, postkeys.TakeoverParams{ID: rec.ID(), Fence: rec.Fence, From: rec.State, Lease: lease})
	if err != nil {
		s.t.Fatalf("Takeover: %v", err)
	}
	return c, ok
}

func (s *suite) complete(key string, fence int64) bool {
	s.t.Helper()
	ok, err := s.h.Store.Complete(s.ctx, s.h.DB.Gorm, postkeys.CompleteParams{ID: id(key), Fence: fence,
		Status: http.StatusCreated, Header: http.Header{"Location": {"/x/" + key}}, Body: []byte(`{"k":"` + key + `"}`),
		Ref: "ref-" + key, TTL: time.Hour})
	if err != nil {
		s.t.Fatalf("Complete: %v", err)
	}
	return ok
}

// attemptWrites tries every write of an attempt with fence and reports
// which applied.
func (s *suite) attemptWrites(key string, fence int64) []string {
	s.t.Helper()
	db := s.h.DB.Gorm
	var applied []string
	check := func(name string, ok bool, err error) {
		if err != nil {
			s.t.Fatalf("%s: %v", name, err)
		}
		if ok {
			applied = append(applied, name)
		}
	}
	ok, err := s.h.Store.Advance(s.ctx, db, postkeys.AdvanceParams{ID: id(key), Fence: fence, Point: "phase1", Ref: "stale", Lease: lease})
	check("Advance", ok, err)
	ok, err = s.h.Store.Renew(s.ctx, db, postkeys.RenewParams{ID: id(key), Fence: fence, Lease: lease})
	check("Renew", ok, err)
	ok, err = s.h.Store.MarkUnknown(s.ctx, db, postkeys.MarkUnknownParams{ID: id(key), Fence: fence, ErrorCode: "x"})
	check("MarkUnknown", ok, err)
	ok, err = s.h.Store.Release(s.ctx, db, postkeys.ReleaseParams{ID: id(key), Fence: fence})
	check("Release", ok, err)
	check("Complete", s.complete(key, fence), nil)
	return applied
}

func testInsert(t *testing.T, s *suite) {
	c := s.insert("k")
	rec := s.mustGet("k")
	if rec.State != postkeys.StateInProgress || rec.RecoveryPoint != postkeys.PointStarted || rec.Fence != c.Fence ||
		rec.Attempt != 1 || rec.Fingerprint != "v1:fp-k" || rec.FingerprintVersion != 1 || rec.Expired || rec.LeaseExpired {
		t.Fatalf("claimed record %+v", rec)
	}
	if d := rec.LockedUntil.Sub(rec.CreatedAt); d < lease-time.Second || d > lease+time.Second {
		t.Fatalf("lease = %v, want %v from the claim", d, lease)
	}
	if d := rec.ExpiresAt.Sub(rec.CreatedAt); d < ttl-time.Second || d > ttl+time.Second {
		t.Fatalf("expiry = %v after the claim, want %v", d, ttl)
	}
	// A held key: no claim, and the record is exactly as it was.
	for _, held := range []bool{true, false} {
		if !held {
			s.complete("k", c.Fence)
			rec = s.mustGet("k")
		}
		var ok bool
		if err := s.write(func(tx *gorm.DB) (err error) {
			_, ok, err = s.h.Store.Insert(s.ctx, tx, postkeys.ClaimParams{ID: id("k"), Fingerprint: "v1:other", FingerprintVersion: 1, Lease: lease, TTL: ttl})
			return err
		}); err != nil || ok {
			t.Fatalf("Insert on a held key = %v, %v", ok, err)
		}
		if after := s.mustGet("k"); !after.UpdatedAt.Equal(rec.UpdatedAt) || after.Fence != rec.Fence || after.Fingerprint != rec.Fingerprint {
			t.Fatalf("Insert on a held key changed it: %+v → %+v", rec, after)
		}
	}
	if _, found := s.get("other"); found {
		t.Fatal("Get found a record never claimed")
	}
}

func testConcurrentInsert(t *testing.T, s *suite) {
	const n = 8
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		wins   int
		fences = map[int64]bool{}
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var (
				c  postkeys.Claim
				ok bool
			)
			err := s.write(func(tx *gorm.DB) (err error) {
				c, ok, err = s.h.Store.Insert(s.ctx, tx, claimParams("k"))
				return err
			})
			mu.Lock()
			defer mu.Unlock()
			if err != nil && !errors.Is(err, store.ErrLockTimeout) {
				t.Errorf("Insert: %v", err)
			}
			if ok {
				wins++
				fences[c.Fence] = true
			}
		}()
	}
	wg.Wait()
	if wins != 1 {
		t.Fatalf("%d of %d concurrent inserts claimed the key, want 1", wins, n)
	}
}

func testTakeover(t *testing.T, s *suite) {
	first := s.insert("k")
	rec := s.mustGet("k")
	if _, ok := s.takeover(rec); ok {
		t.Fatal("took over a live lease")
	}
	s.h.Advance(lease + time.Second)
	rec = s.mustGet("k")
	if !rec.LeaseExpired {
		t.Fatalf("lease not expired on the moved clock: %+v", rec)
	}
	stale := rec
	stale.Fence++
	if _, ok := s.takeover(stale); ok {
		t.Fatal("took over with a fence the record does not carry")
	}
	c, ok := s.takeover(rec)
	if !ok || c.Fence == first.Fence || c.Fence <= 0 || c.Attempt != 2 {
		t.Fatalf("takeover = %+v, %v; first claim %+v", c, ok, first)
	}
	if _, ok := s.takeover(rec); ok {
		t.Fatal("a second taker with the same view also won")
	}
	after := s.mustGet("k")
	if after.Fence != c.Fence || after.State != postkeys.StateInProgress || after.LeaseExpired {
		t.Fatalf("record after takeover %+v", after)
	}
	// An unknown record is taken over at once, lease or not.
	if ok, err := s.h.Store.MarkUnknown(s.ctx, s.h.DB.Gorm, postkeys.MarkUnknownParams{ID: id("k"), Fence: c.Fence, ErrorCode: "unavailable"}); err != nil || !ok {
		t.Fatalf("MarkUnknown = %v, %v", ok, err)
	}
	unknown := s.mustGet("k")
	if unknown.State != postkeys.StateUnknown || unknown.ErrorCode != "unavailable" || !unknown.LockedUntil.IsZero() {
		t.Fatalf("unknown record %+v", unknown)
	}
	c3, ok := s.takeover(unknown)
	if !ok || c3.Fence == c.Fence || c3.Attempt != 3 {
		t.Fatalf("takeover of unknown = %+v, %v", c3, ok)
	}
}

func testFencedAfterTakeover(t *testing.T, s *suite) {
	first := s.insert("k")
	s.h.Advance(lease + time.Second)
	c, ok := s.takeover(s.mustGet("k"))
	if !ok {
		t.Fatal("no takeover")
	}
	before := s.mustGet("k")
	if applied := s.attemptWrites("k", first.Fence); len(applied) != 0 {
		t.Fatalf("the taken-over attempt's %v applied", applied)
	}
	if after := s.mustGet("k"); after.Fence != c.Fence || !after.UpdatedAt.Equal(before.UpdatedAt) || after.RecoveryPoint != postkeys.PointStarted {
		t.Fatalf("the stale attempt changed the record: %+v", after)
	}
}

func testFencedAfterRelease(t *testing.T, s *suite) {
	first := s.insert("k")
	s.h.Advance(lease + time.Second)
	c, ok := s.takeover(s.mustGet("k"))
	if !ok {
		t.Fatal("no takeover")
	}
	if ok, err := s.h.Store.Release(s.ctx, s.h.DB.Gorm, postkeys.ReleaseParams{ID: id("k"), Fence: c.Fence}); err != nil || !ok {
		t.Fatalf("Release = %v, %v", ok, err)
	}
	if _, found := s.get("k"); found {
		t.Fatal("a released key still has a record")
	}
	again := s.insert("k")
	if again.Fence == first.Fence || again.Fence == c.Fence || again.Fence < c.Fence {
		t.Fatalf("re-claim fence %d repeats or goes back (claims %d, %d)", again.Fence, first.Fence, c.Fence)
	}
	before := s.mustGet("k")
	for _, stale := range []int64{first.Fence, c.Fence} {
		if applied := s.attemptWrites("k", stale); len(applied) != 0 {
			t.Fatalf("fence %d: %v applied on the re-claimed record", stale, applied)
		}
	}
	if after := s.mustGet("k"); after.Fence != again.Fence || !after.UpdatedAt.Equal(before.UpdatedAt) {
		t.Fatalf("a stale attempt changed the re-claimed record: %+v", after)
	}
	// A release needs the record still at its first recovery point.
	if ok, err := s.h.Store.Advance(s.ctx, s.h.DB.Gorm, postkeys.AdvanceParams{ID: id("k"), Fence: again.Fence, Point: "phase1", Lease: lease}); err != nil || !ok {
		t.Fatalf("Advance = %v, %v", ok, err)
	}
	if ok, err := s.h.Store.Release(s.ctx, s.h.DB.Gorm, postkeys.ReleaseParams{ID: id("k"), Fence: again.Fence}); err != nil || ok {
		t.Fatalf("Release past the first phase = %v, %v", ok, err)
	}
}

func testFencedAfterOwnLease(t *testing.T, s *suite) {
	c := s.insert("k")
	before := s.mustGet("k")
	s.h.Advance(lease + time.Second)
	if applied := s.attemptWrites("k", c.Fence); len(applied) != 0 {
		t.Fatalf("writes %v applied after the attempt's own lease ended", applied)
	}
	if after := s.mustGet("k"); !after.UpdatedAt.Equal(before.UpdatedAt) || after.State != postkeys.StateInProgress {
		t.Fatalf("the record changed: %+v", after)
	}
}

func testRenew(t *testing.T, s *suite) {
	c := s.insert("k")
	s.h.Advance(lease - 5*time.Second)
	if ok, err := s.h.Store.Renew(s.ctx, s.h.DB.Gorm, postkeys.RenewParams{ID: id("k"), Fence: c.Fence, Lease: lease}); err != nil || !ok {
		t.Fatalf("Renew = %v, %v", ok, err)
	}
	s.h.Advance(10 * time.Second) // past the first lease, inside the renewed one
	if rec := s.mustGet("k"); rec.LeaseExpired {
		t.Fatalf("renewed lease expired: %+v", rec)
	}
	if ok, err := s.h.Store.Advance(s.ctx, s.h.DB.Gorm, postkeys.AdvanceParams{ID: id("k"), Fence: c.Fence, Point: "phase1", Ref: "r1", Lease: lease}); err != nil || !ok {
		t.Fatalf("Advance = %v, %v", ok, err)
	}
	if rec := s.mustGet("k"); rec.RecoveryPoint != "phase1" || rec.ResourceRef != "r1" {
		t.Fatalf("advanced record %+v", rec)
	}
	// An empty ref keeps the one recorded.
	if ok, err := s.h.Store.Advance(s.ctx, s.h.DB.Gorm, postkeys.AdvanceParams{ID: id("k"), Fence: c.Fence, Point: "phase2", Lease: lease}); err != nil || !ok {
		t.Fatalf("Advance = %v, %v", ok, err)
	}
	if rec := s.mustGet("k"); rec.RecoveryPoint != "phase2" || rec.ResourceRef != "r1" {
		t.Fatalf("advanced record %+v", rec)
	}
}

func testComplete(t *testing.T, s *suite) {
	c := s.insert("k")
	if !s.complete("k", c.Fence) {
		t.Fatal("Complete did not apply")
	}
	rec := s.mustGet("k")
	if rec.State != postkeys.StateCompleted || rec.ResponseStatus != http.StatusCreated || string(rec.ResponseBody) != `{"k":"k"}` ||
		rec.ResponseHeader.Get("Location") != "/x/k" || rec.ResourceRef != "ref-k" || !rec.LockedUntil.IsZero() || rec.Truncated {
		t.Fatalf("completed record %+v", rec)
	}
	if d := rec.ExpiresAt.Sub(rec.UpdatedAt); d < time.Hour-time.Second || d > time.Hour+time.Second {
		t.Fatalf("expires %v after completion, want 1h", d)
	}
	if s.complete("k", c.Fence) {
		t.Fatal("a second completion applied")
	}
	c2 := s.insert("big")
	ok, err := s.h.Store.Complete(s.ctx, s.h.DB.Gorm, postkeys.CompleteParams{ID: id("big"), Fence: c2.Fence, Status: 402,
		Body: []byte("x"), Truncated: true, Ref: "ref-big", ErrorCode: "card_declined", TTL: time.Hour})
	if err != nil || !ok {
		t.Fatalf("Complete = %v, %v", ok, err)
	}
	if rec := s.mustGet("big"); !rec.Truncated || rec.ResponseBody != nil || rec.ErrorCode != "card_declined" || rec.ResponseStatus != 402 {
		t.Fatalf("truncated record %+v", rec)
	}
}

// testCompleteWithPoint: a completion that names a recovery point records
// it with the outcome in one statement (the last phase and the stored
// response commit together); one that names none keeps the record's point.
// Fenced like every write of an attempt.
func testCompleteWithPoint(t *testing.T, s *suite) {
	c := s.insert("k")
	if ok, err := s.h.Store.Advance(s.ctx, s.h.DB.Gorm, postkeys.AdvanceParams{ID: id("k"), Fence: c.Fence, Point: "phase1", Ref: "r1", Lease: lease}); err != nil || !ok {
		t.Fatalf("Advance = %v, %v", ok, err)
	}
	complete := func(key string, fence int64, point string) bool {
		t.Helper()
		ok, err := s.h.Store.Complete(s.ctx, s.h.DB.Gorm, postkeys.CompleteParams{ID: id(key), Fence: fence,
			Status: http.StatusCreated, Body: []byte(`{}`), Point: point, TTL: time.Hour})
		if err != nil {
			t.Fatalf("Complete: %v", err)
		}
		return ok
	}
	if complete("k", c.Fence+1000, "phase2") {
		t.Fatal("a completion with another fence applied")
	}
	if rec := s.mustGet("k"); rec.State != postkeys.StateInProgress || rec.RecoveryPoint != "phase1" {
		t.Fatalf("record after a fenced completion %+v", rec)
	}
	if !complete("k", c.Fence, "phase2") {
		t.Fatal("Complete with a point did not apply")
	}
	if rec := s.mustGet("k"); rec.State != postkeys.StateCompleted || rec.RecoveryPoint != "phase2" || rec.ResourceRef != "r1" ||
		rec.ResponseStatus != http.StatusCreated || !rec.LockedUntil.IsZero() {
		t.Fatalf("completed record %+v, want phase2 with the outcome", rec)
	}
	c2 := s.insert("k2")
	if ok, err := s.h.Store.Advance(s.ctx, s.h.DB.Gorm, postkeys.AdvanceParams{ID: id("k2"), Fence: c2.Fence, Point: "phase1", Lease: lease}); err != nil || !ok {
		t.Fatalf("Advance = %v, %v", ok, err)
	}
	if !complete("k2", c2.Fence, "") {
		t.Fatal("Complete without a point did not apply")
	}
	if rec := s.mustGet("k2"); rec.State != postkeys.StateCompleted || rec.RecoveryPoint != "phase1" {
		t.Fatalf("completed record %+v, want its point kept", rec)
	}
}

func testReclaim(t *testing.T, s *suite) {
	reclaim := func(key, fp string) (postkeys.Claim, bool) {
		t.Helper()
		var (
			c  postkeys.Claim
			ok bool
		)
		if err := s.write(func(tx *gorm.DB) (err error) {
			c, ok, err = s.h.Store.Reclaim(s.ctx, tx, postkeys.ClaimParams{ID: id(key), Fingerprint: fp, FingerprintVersion: 1, Lease: lease, TTL: ttl})
			return err
		}); err != nil {
			t.Fatalf("Reclaim: %v", err)
		}
		return c, ok
	}
	first := s.insert("k")
	if _, ok := reclaim("k", "v1:new"); ok {
		t.Fatal("reclaimed an in-progress record")
	}
	s.complete("k", first.Fence)
	if _, ok := reclaim("k", "v1:new"); ok {
		t.Fatal("reclaimed a live completed record")
	}
	s.h.Advance(time.Hour - 5*time.Second)
	if rec := s.mustGet("k"); rec.Expired {
		t.Fatalf("expired early: %+v", rec)
	}
	s.h.Advance(10 * time.Second)
	if rec := s.mustGet("k"); !rec.Expired {
		t.Fatalf("not expired on the moved clock: %+v", rec)
	}
	c, ok := reclaim("k", "v1:new")
	if !ok || c.Fence == first.Fence || c.Fence < first.Fence || c.Attempt != 2 {
		t.Fatalf("reclaim = %+v, %v (first %+v)", c, ok, first)
	}
	rec := s.mustGet("k")
	if rec.State != postkeys.StateInProgress || rec.Fingerprint != "v1:new" || rec.ResponseStatus != 0 || rec.ResponseBody != nil ||
		rec.ResourceRef != "" || rec.Expired || rec.RecoveryPoint != postkeys.PointStarted {
		t.Fatalf("reclaimed record %+v", rec)
	}
	// An absent key is claimed by Reclaim as well.
	if c, ok := reclaim("absent", "v1:a"); !ok || c.Attempt != 1 {
		t.Fatalf("reclaim of an absent key = %+v, %v", c, ok)
	}
}

func testJanitor(t *testing.T, s *suite) {
	for _, k := range []string{"c1", "c2", "c3"} {
		s.complete(k, s.insert(k).Fence)
	}
	s.insert("running")
	u := s.insert("unknown")
	if ok, err := s.h.Store.MarkUnknown(s.ctx, s.h.DB.Gorm, postkeys.MarkUnknownParams{ID: id("unknown"), Fence: u.Fence}); err != nil || !ok {
		t.Fatalf("MarkUnknown = %v, %v", ok, err)
	}
	if n, err := s.h.Store.DeleteExpired(s.ctx, s.h.DB.Gorm, 10); err != nil || n != 0 {
		t.Fatalf("DeleteExpired before expiry = %d, %v", n, err)
	}
	s.h.Advance(48 * time.Hour)
	var total []int64
	for {
		n, err := s.h.Store.DeleteExpired(s.ctx, s.h.DB.Gorm, 2)
		if err != nil {
			t.Fatal(err)
		}
		total = append(total, n)
		if n < 2 {
			break
		}
	}
	if len(total) != 2 || total[0] != 2 || total[1] != 1 {
		t.Fatalf("batches deleted %v, want [2 1]", total)
	}
	for _, k := range []string{"running", "unknown"} {
		s.mustGet(k)
	}
}

func testFenceAfterJanitor(t *testing.T, s *suite) {
	first := s.insert("k")
	s.complete("k", first.Fence)
	s.h.Advance(2 * time.Hour)
	if n, err := s.h.Store.DeleteExpired(s.ctx, s.h.DB.Gorm, 10); err != nil || n != 1 {
		t.Fatalf("DeleteExpired = %d, %v", n, err)
	}
	again := s.insert("k")
	if again.Fence <= first.Fence {
		t.Fatalf("fence after the janitor's delete = %d, first claim's %d: a token repeated or went back", again.Fence, first.Fence)
	}
	if applied := s.attemptWrites("k", first.Fence); len(applied) != 0 {
		t.Fatalf("the deleted record's attempt applied %v", applied)
	}
}

func testUnfinished(t *testing.T, s *suite) {
	s.insert("old")
	s.h.Advance(lease + time.Second)
	s.insert("live")
	u := s.insert("unknown")
	if ok, err := s.h.Store.MarkUnknown(s.ctx, s.h.DB.Gorm, postkeys.MarkUnknownParams{ID: id("unknown"), Fence: u.Fence}); err != nil || !ok {
		t.Fatalf("MarkUnknown = %v, %v", ok, err)
	}
	s.complete("done", s.insert("done").Fence)
	recs, err := s.h.Store.ListUnfinished(s.ctx, s.h.DB.Gorm, 10)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]postkeys.State{}
	for _, r := range recs {
		got[r.Key] = r.State
	}
	if len(got) != 2 || got["old"] != postkeys.StateInProgress || got["unknown"] != postkeys.StateUnknown {
		t.Fatalf("unfinished = %v, want old (lease expired) and unknown", got)
	}
	if recs, err := s.h.Store.ListUnfinished(s.ctx, s.h.DB.Gorm, 1); err != nil || len(recs) != 1 {
		t.Fatalf("limit 1 = %d records, %v", len(recs), err)
	}
	stats, err := s.h.Store.Stats(s.ctx, s.h.DB.Gorm)
	if err != nil {
		t.Fatal(err)
	}
	if stats.Unknown != 1 || stats.OldestInProgress < lease || stats.OldestInProgress > lease+10*time.Second {
		t.Fatalf("stats %+v, want 1 unknown and the oldest in progress about %v old", stats, lease+time.Second)
	}
}

func testLockTimeout(t *testing.T, s *suite) {
	held, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	rollback := errors.New("roll back")
	go func() {
		done <- s.write(func(tx *gorm.DB) error {
			if _, ok, err := s.h.Store.Insert(s.ctx, tx, claimParams("k")); err != nil || !ok {
				return errors.Join(err, errors.New("holder did not claim"))
			}
			close(held)
			<-release
			return rollback
		})
	}()
	<-held
	var ok bool
	err := s.write(func(tx *gorm.DB) (err error) {
		_, ok, err = s.h.Store.Insert(s.ctx, tx, claimParams("k"))
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
	s.insert("k")
}

func testErrors(t *testing.T, s *suite) {
	ctx, cancel := context.WithCancel(s.ctx)
	cancel()
	_, _, err := s.h.Store.Get(ctx, s.h.DB.Gorm, id("k"))
	if err == nil {
		t.Fatal("Get on a cancelled context succeeded")
	}
	if errors.Is(err, store.ErrLockTimeout) || errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("the store classified its error itself: %v", err)
	}
	if classified := s.h.DB.Classify(err); errors.Is(classified, store.ErrLockTimeout) {
		t.Fatalf("a cancelled context classified as a lock timeout: %v", classified)
	}
}

func testList(t *testing.T, s *suite) {
	s.insert("old")
	s.h.Advance(time.Hour)
	s.complete("done", s.insert("done").Fence)
	u := s.insert("unknown")
	if ok, err := s.h.Store.MarkUnknown(s.ctx, s.h.DB.Gorm, postkeys.MarkUnknownParams{ID: id("unknown"), Fence: u.Fence}); err != nil || !ok {
		t.Fatalf("MarkUnknown = %v, %v", ok, err)
	}
	other := claimParams("other")
	other.ID.Tenant = "t2"
	if err := s.write(func(tx *gorm.DB) error { _, _, err := s.h.Store.Insert(s.ctx, tx, other); return err }); err != nil {
		t.Fatal(err)
	}
	keys := func(p postkeys.ListParams) []string {
		t.Helper()
		p.Limit = max(p.Limit, 10)
		recs, err := s.h.Store.List(s.ctx, s.h.DB.Gorm, p)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, r := range recs {
			out = append(out, r.Key)
		}
		return out
	}
	for _, c := range []struct {
		p    postkeys.ListParams
		want string
	}{
		{postkeys.ListParams{}, "[old done unknown other]"},
		{postkeys.ListParams{Tenant: "t1"}, "[old done unknown]"},
		{postkeys.ListParams{State: postkeys.StateUnknown}, "[unknown]"},
		{postkeys.ListParams{State: postkeys.StateInProgress}, "[old other]"},
		{postkeys.ListParams{OlderThan: 30 * time.Minute}, "[old]"},
		{postkeys.ListParams{Operation: "none"}, "[]"},
	} {
		if got := fmt.Sprint(keys(c.p)); got != c.want {
			t.Fatalf("List(%+v) = %s, want %s", c.p, got, c.want)
		}
	}
	recs, err := s.h.Store.List(s.ctx, s.h.DB.Gorm, postkeys.ListParams{Tenant: "t1", Limit: 1})
	if err != nil || len(recs) != 1 || recs[0].Key != "old" || !recs[0].LeaseExpired {
		t.Fatalf("List limit 1 = %+v, %v: want old, its lease expired", recs, err)
	}
	if _, err := s.h.Store.List(s.ctx, s.h.DB.Gorm, postkeys.ListParams{}); err == nil {
		t.Fatal("List without a limit did not fail")
	}
}

func testCountExpired(t *testing.T, s *suite) {
	s.complete("c1", s.insert("c1").Fence)
	s.complete("c2", s.insert("c2").Fence)
	s.insert("running")
	count := func() int64 {
		t.Helper()
		n, err := s.h.Store.CountExpired(s.ctx, s.h.DB.Gorm)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := count(); n != 0 {
		t.Fatalf("CountExpired before expiry = %d", n)
	}
	s.h.Advance(2 * time.Hour)
	if n := count(); n != 2 {
		t.Fatalf("CountExpired = %d, want 2", n)
	}
	if n, err := s.h.Store.DeleteExpired(s.ctx, s.h.DB.Gorm, 10); err != nil || n != 2 {
		t.Fatalf("DeleteExpired = %d, %v", n, err)
	}
}

func testAudit(t *testing.T, s *suite) {
	c := s.insert("k")
	p := postkeys.AuditParams{ID: id("k"), Fence: c.Fence, From: postkeys.StateUnknown, Outcome: postkeys.OutcomeSucceeded,
		Status: http.StatusCreated, Reference: "ch_1", Actor: "alice", Reason: "found"}
	if err := s.write(func(tx *gorm.DB) error { return s.h.Store.Audit(s.ctx, tx, p) }); err != nil {
		t.Fatal(err)
	}
	var rows []struct {
		KeyHash string
		Actor   string
		Fence   int64
	}
	if err := s.h.DB.Gorm.Raw("SELECT key_hash, actor, fence FROM idempotency_resolutions WHERE tenant_id = 't1'").Scan(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if len(rows) != 1 || rows[0].KeyHash == "k" || len(rows[0].KeyHash) != 64 || rows[0].Actor != "alice" || rows[0].Fence != c.Fence {
		t.Fatalf("audit rows %+v, want one by the key's SHA-256", rows)
	}
}

func testOperations(t *testing.T, s *suite) {
	get := func(name string) (postkeys.OperationCodes, bool) {
		t.Helper()
		op, found, err := s.h.Store.GetOperation(s.ctx, s.h.DB.Gorm, name)
		if err != nil {
			t.Fatalf("GetOperation(%s): %v", name, err)
		}
		return op, found
	}
	put := func(p postkeys.OperationCodes) {
		t.Helper()
		if err := s.write(func(tx *gorm.DB) error { return s.h.Store.PutOperation(s.ctx, tx, p) }); err != nil {
			t.Fatalf("PutOperation(%s): %v", p.Operation, err)
		}
	}
	if _, found := get("payments.create"); found {
		t.Fatal("an operation nobody published was found")
	}
	declined := wire.CodeInfo{Code: "card_declined", Status: http.StatusPaymentRequired, Title: "Card declined"}
	busy := wire.CodeInfo{Code: "provider_busy", Status: http.StatusServiceUnavailable, Title: "Provider busy", Retryable: true}
	put(postkeys.OperationCodes{Operation: "payments.create", Codes: []wire.CodeInfo{declined}})
	put(postkeys.OperationCodes{Operation: "transfers", Codes: nil})
	s.h.Advance(time.Minute)
	put(postkeys.OperationCodes{Operation: "payments.create", Codes: []wire.CodeInfo{declined, busy}})
	op, found := get("payments.create")
	if !found || op.Operation != "payments.create" || len(op.Codes) != 2 || op.Codes[0] != declined || op.Codes[1] != busy ||
		op.PublishedAt.IsZero() {
		t.Fatalf("published operation %+v (found %v), want the last publication", op, found)
	}
	if op, found := get("transfers"); !found || len(op.Codes) != 0 {
		t.Fatalf("an operation without codes: %+v (found %v)", op, found)
	}
}
