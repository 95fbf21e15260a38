package storetest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// testOutbox runs the contract of the outbox's statements ([store.Outbox])
// on the driver's migrations: numbering per aggregate, the claim's order
// per aggregate and its backoff, disjoint claims by two relays where the
// claim locks, settling (publish, refuse, park), requeue, the move to
// outbox_published and its batched delete, the backlog and the vacuum.
// The relay's algorithm on top of them is framework/outbox's, tested
// there.
func testOutbox(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		run  func(*testing.T, *outboxCase)
	}{
		{"WriteNumbersPerAggregate", testOutboxWrite},
		{"ClaimOrderPerAggregate", testOutboxClaimOrder},
		{"DisjointClaims", testOutboxDisjointClaims},
		{"SettleParkRequeue", testOutboxSettleParkRequeue},
		{"KeepAndDeletePublished", testOutboxKeepAndDeletePublished},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			db := open(t, h, store.Config{LockTimeout: 2 * time.Second})
			migrate(t, db)
			tc.run(t, &outboxCase{db: db, ob: db.Driver.Outbox(), now: time.Now().UTC().Truncate(time.Millisecond)})
		})
	}
}

// outboxCase is one test's database and the driver's outbox statements.
type outboxCase struct {
	db  *store.DB
	ob  store.Outbox
	now time.Time
}

// event is a new event of aggregate, created at c.now.
func (c *outboxCase) event(aggregate string) store.OutboxWriteEvent {
	return store.OutboxWriteEvent{ID: uuid.NewString(), Tenant: "acme", Type: "thing.happened", AggregateType: "thing",
		AggregateID: aggregate, Payload: `{"agg":"` + aggregate + `"}`, Headers: `{"traceparent":"00-1-2-01"}`, CreatedAt: c.now}
}

// write writes events in one transaction of DB.Write and returns their
// numbers (none when p.Later let the driver queue them).
func (c *outboxCase) write(t *testing.T, p store.OutboxWriteParams) []int64 {
	t.Helper()
	var seqs []int64
	err := c.db.Write(context.Background(), func(tx *gorm.DB) error {
		var err error
		seqs, err = c.ob.Write(context.Background(), tx, p)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !p.Later && len(seqs) != len(p.Events) {
		t.Fatalf("Write returned %d numbers for %d events", len(seqs), len(p.Events))
	}
	return seqs
}

// writeEach writes one event of each aggregate named, in that order, and
// returns the events.
func (c *outboxCase) writeEach(t *testing.T, aggregates ...string) []store.OutboxWriteEvent {
	t.Helper()
	var p store.OutboxWriteParams
	for _, a := range aggregates {
		p.Events = append(p.Events, c.event(a))
	}
	c.write(t, p)
	return p.Events
}

// claim claims as the relay does: in a write transaction where the claim
// locks (committed at once, settling nothing), on the handle elsewhere.
func (c *outboxCase) claim(t *testing.T, p store.OutboxClaimParams) []store.OutboxEventRow {
	t.Helper()
	ctx := context.Background()
	if !c.ob.ClaimLocks() {
		rows, err := c.ob.Claim(ctx, c.db.Gorm, p)
		if err != nil {
			t.Fatal(err)
		}
		return rows
	}
	var rows []store.OutboxEventRow
	if err := c.db.Write(ctx, func(tx *gorm.DB) error {
		var err error
		rows, err = c.ob.Claim(ctx, tx, p)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return rows
}

// settle settles in a transaction of DB.Write.
func (c *outboxCase) settle(t *testing.T, p store.OutboxSettleParams) {
	t.Helper()
	if err := c.db.Write(context.Background(), func(tx *gorm.DB) error { return c.ob.Settle(context.Background(), tx, p) }); err != nil {
		t.Fatal(err)
	}
}

// stats reads the backlog.
func (c *outboxCase) stats(t *testing.T) store.OutboxStats {
	t.Helper()
	st, err := c.ob.Stats(context.Background(), c.db.Gorm)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// count counts the rows of table.
func (c *outboxCase) count(t *testing.T, table string) int64 {
	t.Helper()
	var n int64
	if err := c.db.Gorm.Table(table).Count(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// ids lists the aggregate and seq of rows, as "a/1 a/2 b/1".
func ids(rows []store.OutboxEventRow) string {
	s := ""
	for i, r := range rows {
		if i > 0 {
			s += " "
		}
		s += fmt.Sprintf("%s/%d", r.AggregateID, r.Seq)
	}
	return s
}

// testOutboxWrite: the counter numbers an aggregate's events 1, 2, 3 in
// commit order, in DB.Write, queued (Later) or not, and on the
// application's own transaction; an ordered event's number is above all
// the aggregate's earlier ones; the claim reads back what was written.
func testOutboxWrite(t *testing.T, c *outboxCase) {
	ctx := context.Background()
	a1, a2, b1 := c.event("a"), c.event("a"), c.event("b")
	if seqs := c.write(t, store.OutboxWriteParams{Events: []store.OutboxWriteEvent{a1, a2, b1}}); fmt.Sprint(seqs) != "[1 2 1]" {
		t.Fatalf("numbers %v, want [1 2 1]", seqs)
	}
	// The queued event's text needs quoting (a driver that fills in
	// placeholders on the client, storemysql's batches, quotes it).
	a3 := c.event("a")
	a3.Payload = `{"agg":"a","s":"it's \"quoted\" \\ back; ü 😀 ?"}`
	if seqs := c.write(t, store.OutboxWriteParams{Events: []store.OutboxWriteEvent{a3}, Later: true}); len(seqs) > 0 && seqs[0] != 3 {
		t.Fatalf("queued write numbered %v, want 3 (or no number)", seqs)
	}
	// The application's own transaction, which does not pipeline.
	if err := c.db.Gorm.Transaction(func(tx *gorm.DB) error {
		_, err := c.ob.Write(ctx, tx, store.OutboxWriteParams{Events: []store.OutboxWriteEvent{c.event("a")}, Later: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	var ordered []int64
	for range 2 {
		seqs := c.write(t, store.OutboxWriteParams{Events: []store.OutboxWriteEvent{c.event("a")}, Ordered: true})
		ordered = append(ordered, seqs[0])
	}
	if ordered[0] <= 4 || ordered[1] <= ordered[0] {
		t.Fatalf("ordered events after a/4 numbered %v: not increasing", ordered)
	}
	rows := c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 100})
	if got, want := ids(rows), fmt.Sprintf("a/1 a/2 b/1 a/3 a/4 a/%d a/%d", ordered[0], ordered[1]); got != want {
		t.Fatalf("claimed %s, want %s", got, want)
	}
	for i := 1; i < len(rows); i++ {
		if rows[i].Position <= rows[i-1].Position {
			t.Fatalf("claimed out of position order: %d after %d", rows[i].Position, rows[i-1].Position)
		}
	}
	r := rows[0]
	if r.ID != a1.ID || r.TenantID != "acme" || r.Type != a1.Type || r.AggregateType != "thing" || r.Payload != a1.Payload ||
		r.Headers != a1.Headers || !r.CreatedAt.Equal(c.now) || !r.AvailableAt.Equal(c.now) || r.Attempts != 0 ||
		r.LastError != nil || r.ParkedAt != nil {
		t.Fatalf("read back %+v, wrote %+v at %v", r, a1, c.now)
	}
	if r := rows[3]; r.ID != a3.ID || r.Payload != a3.Payload || r.Headers != a3.Headers || !r.CreatedAt.Equal(c.now) ||
		!r.AvailableAt.Equal(c.now) || r.Seq != 3 {
		t.Fatalf("the queued event read back %+v, wrote %+v at %v", r, a3, c.now)
	}
	if err := c.db.Write(ctx, func(tx *gorm.DB) error {
		_, err := c.ob.Write(ctx, tx, store.OutboxWriteParams{Events: []store.OutboxWriteEvent{c.event("z")}})
		if err != nil {
			return err
		}
		return errors.New("roll back")
	}); err == nil {
		t.Fatal("the rolled-back write succeeded")
	}
	if n := c.count(t, "outbox_events"); n != int64(len(rows)) {
		t.Fatalf("%d events after a rolled-back write, want %d", n, len(rows))
	}
}

// testOutboxClaimOrder: a claim takes pending events in position order up
// to its limit, starting at each aggregate's earliest pending event; an
// event behind a refused one that waits out its backoff is not claimed,
// while other aggregates' events are, and both are once the backoff is
// over.
func testOutboxClaimOrder(t *testing.T, c *outboxCase) {
	c.writeEach(t, "a", "a", "b", "c")
	if got := ids(c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 2})); got != "a/1 a/2" {
		t.Fatalf("claimed %s, want a/1 a/2", got)
	}
	head := c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 1})[0]
	retry := c.now.Add(time.Hour)
	c.settle(t, store.OutboxSettleParams{Now: c.now, Refused: []store.OutboxRefusal{{Position: head.Position, Error: "too large", RetryAt: retry}}})
	if got := ids(c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 10})); got != "b/1 c/1" {
		t.Fatalf("claimed %s while a/1 waits out its backoff, want b/1 c/1", got)
	}
	rows := c.claim(t, store.OutboxClaimParams{Now: retry.Add(time.Second), Limit: 10})
	if got := ids(rows); got != "a/1 a/2 b/1 c/1" {
		t.Fatalf("claimed %s after the backoff, want a/1 a/2 b/1 c/1", got)
	}
	if r := rows[0]; r.Attempts != 1 || r.LastError == nil || *r.LastError != "too large" || !r.AvailableAt.Equal(retry) || r.ParkedAt != nil {
		t.Fatalf("the refused event reads %+v", r)
	}
}

// testOutboxDisjointClaims: where the claim locks, a second relay's claim
// while the first holds its batch skips the batch and every later event
// of its aggregates, and takes the rest; once the first relay settles,
// the aggregates' next events are claimed.
func testOutboxDisjointClaims(t *testing.T, c *outboxCase) {
	if !c.ob.ClaimLocks() {
		t.Skip("the driver's claim does not lock: one relay per database")
	}
	ctx := context.Background()
	c.writeEach(t, "a", "a", "b", "c")
	claimed, release, done := make(chan []store.OutboxEventRow, 1), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- c.db.Write(ctx, func(tx *gorm.DB) error {
			rows, err := c.ob.Claim(ctx, tx, store.OutboxClaimParams{Now: c.now, Limit: 1})
			claimed <- rows
			if err != nil || len(rows) == 0 {
				return fmt.Errorf("the first claim: %d rows, %v", len(rows), err)
			}
			<-release
			return c.ob.Settle(ctx, tx, store.OutboxSettleParams{Now: c.now, Published: []int64{rows[0].Position}})
		})
	}()
	first := <-claimed
	second := c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 10})
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := ids(first); got != "a/1" {
		t.Fatalf("the first relay claimed %s, want a/1", got)
	}
	if got := ids(second); got != "b/1 c/1" {
		t.Fatalf("the second relay claimed %s while the first held a/1, want b/1 c/1", got)
	}
	if got := ids(c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 10})); got != "a/2 b/1 c/1" {
		t.Fatalf("claimed %s after a/1 was published, want a/2 b/1 c/1", got)
	}
}

// testOutboxSettleParkRequeue: a settle deletes the published events and
// parks a refused one; a parked event blocks nothing, is listed and
// counted, and a requeue makes it pending again, once.
func testOutboxSettleParkRequeue(t *testing.T, c *outboxCase) {
	ctx := context.Background()
	if st := c.stats(t); st != (store.OutboxStats{}) {
		t.Fatalf("an empty outbox has stats %+v", st)
	}
	written := c.writeEach(t, "a", "a", "b")
	rows := c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 10})
	parkedAt := c.now.Add(time.Minute)
	c.settle(t, store.OutboxSettleParams{Now: parkedAt, Published: []int64{rows[2].Position},
		Refused: []store.OutboxRefusal{{Position: rows[0].Position, Error: "no stream", RetryAt: parkedAt, Park: true}}})
	if n := c.count(t, "outbox_events"); n != 2 {
		t.Fatalf("%d events left, want 2 (b/1 published and deleted)", n)
	}
	if n := c.count(t, "outbox_published"); n != 0 {
		t.Fatalf("%d events kept without KeepPublished", n)
	}
	if st := c.stats(t); st.Pending != 1 || st.Parked != 1 || !st.OldestPending.Equal(c.now) {
		t.Fatalf("stats %+v, want 1 pending since %v, 1 parked", st, c.now)
	}
	if got := ids(c.claim(t, store.OutboxClaimParams{Now: parkedAt.Add(time.Hour), Limit: 10})); got != "a/2" {
		t.Fatalf("claimed %s with a/1 parked, want a/2", got)
	}
	parked, err := c.ob.ListParked(ctx, c.db.Gorm, store.OutboxListParkedParams{Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	if len(parked) != 1 || parked[0].ID != written[0].ID || parked[0].Attempts != 1 || parked[0].LastError == nil ||
		*parked[0].LastError != "no stream" || parked[0].ParkedAt == nil || !parked[0].ParkedAt.Equal(parkedAt) {
		t.Fatalf("parked %+v", parked)
	}
	requeue := func(id string) bool {
		t.Helper()
		ok, err := c.ob.Requeue(ctx, c.db.Gorm, store.OutboxRequeueParams{ID: id, Now: c.now})
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	if !requeue(written[0].ID) || requeue(written[0].ID) || requeue(written[1].ID) || requeue(uuid.NewString()) {
		t.Fatal("a requeue other than the parked event's first one succeeded, or that one failed")
	}
	rows = c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 10})
	if got := ids(rows); got != "a/1 a/2" {
		t.Fatalf("claimed %s after the requeue, want a/1 a/2", got)
	}
	if r := rows[0]; r.Attempts != 0 || r.LastError != nil || r.ParkedAt != nil || !r.AvailableAt.Equal(c.now) {
		t.Fatalf("the requeued event reads %+v", r)
	}
	if st := c.stats(t); st.Pending != 2 || st.Parked != 0 {
		t.Fatalf("stats %+v after the requeue", st)
	}
}

// testOutboxKeepAndDeletePublished: with KeepPublished a settle moves the
// published events to outbox_published, in DB.Write and on the
// application's own transaction; DeletePublished deletes those published
// before its cutoff, at most its limit a call.
func testOutboxKeepAndDeletePublished(t *testing.T, c *outboxCase) {
	ctx := context.Background()
	c.writeEach(t, "a", "a", "b", "c", "d")
	rows := c.claim(t, store.OutboxClaimParams{Now: c.now, Limit: 10})
	if len(rows) != 5 {
		t.Fatalf("claimed %s", ids(rows))
	}
	publishedAt := c.now.Add(time.Minute)
	c.settle(t, store.OutboxSettleParams{Now: publishedAt, KeepPublished: true, Published: []int64{rows[0].Position, rows[1].Position, rows[2].Position}})
	if err := c.db.Gorm.Transaction(func(tx *gorm.DB) error {
		return c.ob.Settle(ctx, tx, store.OutboxSettleParams{Now: publishedAt.Add(time.Minute), KeepPublished: true,
			Published: []int64{rows[3].Position, rows[4].Position}})
	}); err != nil {
		t.Fatal(err)
	}
	if n := c.count(t, "outbox_events"); n != 0 {
		t.Fatalf("%d events left in outbox_events, want none", n)
	}
	type kept struct {
		Position    int64
		ID          string
		Seq         int64
		PublishedAt time.Time
	}
	var got []kept
	if err := c.db.Gorm.Table("outbox_published").Select("position, id, seq, published_at").Order("position").Find(&got).Error; err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || got[0].Position != rows[0].Position || got[0].ID != rows[0].ID || got[1].Seq != 2 ||
		!got[0].PublishedAt.Equal(publishedAt) || !got[4].PublishedAt.Equal(publishedAt.Add(time.Minute)) {
		t.Fatalf("kept %+v", got)
	}
	del := func(before time.Time, limit int) int64 {
		t.Helper()
		n, err := c.ob.DeletePublished(ctx, c.db.Gorm, store.OutboxDeletePublishedParams{Before: before, Limit: limit})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if n := del(publishedAt, 10); n != 0 {
		t.Fatalf("deleted %d events published at the cutoff", n)
	}
	if n := del(publishedAt.Add(time.Second), 2); n != 2 {
		t.Fatalf("deleted %d, want a batch of 2", n)
	}
	if n := del(publishedAt.Add(time.Second), 2); n != 1 {
		t.Fatalf("deleted %d, want the last 1 before the cutoff", n)
	}
	if n := del(publishedAt.Add(time.Hour), 10); n != 2 || c.count(t, "outbox_published") != 0 {
		t.Fatalf("deleted %d, want the 2 published later", n)
	}
	if err := c.ob.Vacuum(ctx, c.db.Gorm); err != nil {
		t.Fatalf("vacuum by the database's owner: %v", err)
	}
}
