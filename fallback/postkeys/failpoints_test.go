package postkeys_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// statementLog is a spy on the adapter's record statements: it notes, in
// order, every statement a request runs and the transaction it runs in:
// "tx2:Advance" is an Advance in the second transaction seen, a bare
// "Get" a read outside any transaction.
type statementLog struct {
	store.Records
	mu sync.Mutex
	// txs are the connections of the transactions seen, in order; keeping
	// them keeps a later transaction from reusing an address.
	txs   []gorm.ConnPool
	steps []string
}

func (l *statementLog) note(db *gorm.DB, kind string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	pool := db.Statement.ConnPool
	if _, inTx := pool.(gorm.TxCommitter); !inTx {
		l.steps = append(l.steps, kind)
		return
	}
	i := slices.Index(l.txs, pool)
	if i < 0 {
		l.txs = append(l.txs, pool)
		i = len(l.txs) - 1
	}
	l.steps = append(l.steps, fmt.Sprintf("tx%d:%s", i+1, kind))
}

// transactions returns the steps so far and the number of transactions
// they ran in.
func (l *statementLog) transactions() (string, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.steps, " "), len(l.txs)
}

func (l *statementLog) Insert(ctx context.Context, db *gorm.DB, p *store.RecordClaimParams) (store.RecordClaim, bool, error) {
	l.note(db, "Insert")
	return l.Records.Insert(ctx, db, p)
}

func (l *statementLog) Reclaim(ctx context.Context, db *gorm.DB, p *store.RecordClaimParams) (store.RecordClaim, bool, error) {
	l.note(db, "Reclaim")
	return l.Records.Reclaim(ctx, db, p)
}

func (l *statementLog) Get(ctx context.Context, db *gorm.DB, p *store.RecordGetParams) (store.RecordRow, bool, error) {
	l.note(db, "Get")
	return l.Records.Get(ctx, db, p)
}

func (l *statementLog) Takeover(ctx context.Context, db *gorm.DB, p *store.RecordTakeoverParams) (store.RecordClaim, bool, error) {
	l.note(db, "Takeover")
	return l.Records.Takeover(ctx, db, p)
}

func (l *statementLog) Advance(ctx context.Context, db *gorm.DB, p *store.RecordAdvanceParams) (bool, error) {
	l.note(db, "Advance")
	return l.Records.Advance(ctx, db, p)
}

func (l *statementLog) Renew(ctx context.Context, db *gorm.DB, p *store.RecordRenewParams) (bool, error) {
	l.note(db, "Renew")
	return l.Records.Renew(ctx, db, p)
}

func (l *statementLog) Complete(ctx context.Context, db *gorm.DB, p *store.RecordCompleteParams) (bool, error) {
	kind := "Complete"
	if p.Point != "" {
		kind = "Complete+phase" // Run.Complete: the last phase with the outcome
	}
	l.note(db, kind)
	return l.Records.Complete(ctx, db, p)
}

func (l *statementLog) MarkUnknown(ctx context.Context, db *gorm.DB, p *store.RecordMarkUnknownParams) (bool, error) {
	l.note(db, "MarkUnknown")
	return l.Records.MarkUnknown(ctx, db, p)
}

func (l *statementLog) Release(ctx context.Context, db *gorm.DB, p *store.RecordReleaseParams) (bool, error) {
	l.note(db, "Release")
	return l.Records.Release(ctx, db, p)
}

// TestFailPointsKeepTheTransactions: a fail point function that only watches
// (it notes the point and returns nil) changes nothing an operation
// commits: every kind of operation runs the same record statements, in the
// same transactions, in the same order, as without one. So the fault
// tests, which set one, test the layout production runs.
//
// The layouts compared are those of requests that each got their usual
// answer, checked one by one: a statement that a loaded machine's
// database runs past a timeout answers otherwise (409 after a lock wait,
// 503 after the statement timeout) and takes another path, so the store
// waits a minute (patient) rather than the default seconds, and an answer
// other than the usual one says so instead of showing as another layout.
func TestFailPointsKeepTheTransactions(t *testing.T) {
	t.Parallel()
	type request struct {
		path, key, body string
		status          int
	}
	create := []request{{"/v1/widgets", "k1", `{"name":"w1"}`, http.StatusCreated}, {"/v1/widgets", "k1", `{"name":"w1"}`, http.StatusCreated},
		{"/v1/widgets", "k2", `{"name":"w2","decline":true}`, http.StatusPaymentRequired},
		{"/v1/widgets", "k1", `{"name":"other"}`, http.StatusUnprocessableEntity}}
	for _, tc := range []struct {
		name                        string
		claimInFirstPhase, complete bool
		requests                    []request
		// commits is what the requests commit: every transaction the log
		// saw (none fails here). Phased: every request reads the record
		// first; the replay is answered from that read, and the key reuse
		// claims in vain, in one transaction.
		commits int
	}{
		{name: "local", requests: []request{{"/v1/counters", "k1", `{"by":1}`, http.StatusOK}, {"/v1/counters", "k1", `{"by":1}`, http.StatusOK},
			{"/v1/counters", "k1", `{"by":2}`, http.StatusUnprocessableEntity}}, commits: 1},
		// Two requests execute: claim, phase, renewal, completion each
		// (with Run.Complete: claim, phase, renewal, last phase with the
		// outcome); the replay commits nothing, the key reuse claims in
		// vain.
		{name: "phased", requests: create, commits: 9},
		{name: "phased with Run.Complete", complete: true, requests: create, commits: 9},
		// The first phase claims.
		{name: "phased with ClaimInFirstPhase", claimInFirstPhase: true, requests: create, commits: 7},
		{name: "phased with ClaimInFirstPhase and Run.Complete", claimInFirstPhase: true, complete: true, requests: create, commits: 7},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, dialect := range testdb.Dialects() {
				t.Run(dialect, func(t *testing.T) {
					t.Parallel()
					run := func(watch bool) (steps string, commits int, points []string) {
						log := &statementLog{}
						var mu sync.Mutex
						h := setupWith(t, testdb.New(t, dialect), patient, func(cfg *postkeys.Config, w *widgets) {
							w.records = func(r store.Records) store.Records { log.Records = r; return log }
							w.claimInFirstPhase, w.complete = tc.claimInFirstPhase, tc.complete
							if watch {
								w.failPoint = func(_ context.Context, _, point string) error {
									mu.Lock()
									defer mu.Unlock()
									points = append(points, point)
									return nil
								}
							}
						})
						for _, r := range tc.requests {
							if res := h.post(r.path, tokenA, r.key, r.body); res.Status != r.status {
								t.Fatalf("%s %s %s: %d %s, want %d", r.path, r.key, r.body, res.Status, res.Body, r.status)
							}
						}
						steps, commits = log.transactions()
						mu.Lock()
						defer mu.Unlock()
						return steps, commits, points
					}
					plain, plainCommits, _ := run(false)
					watched, watchedCommits, points := run(true)
					t.Logf("statements: %s", plain)
					if watched != plain || watchedCommits != plainCommits {
						t.Fatalf("a watching fail point function changed the transactions:\nwithout: %d, %s\nwith:    %d, %s (points %v)",
							plainCommits, plain, watchedCommits, watched, points)
					}
					if plainCommits != tc.commits {
						t.Fatalf("%d transactions, want %d: %s", plainCommits, tc.commits, plain)
					}
					if tc.name != "local" && len(points) == 0 {
						t.Fatal("no fail point was reached")
					}
				})
			}
		})
	}
}
