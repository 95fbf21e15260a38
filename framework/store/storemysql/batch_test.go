package storemysql_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-sql-driver/mysql"
	gormmysql "gorm.io/driver/mysql"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
	"github.com/retrysafe/retrysafe/framework/store/storemysql"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

// countedConn counts the packets go-sql-driver writes: one per command
// (go-sql-driver sends a command and reads its answer before the next,
// so one per round trip, but for a prepared statement's close, which has
// no answer).
type countedConn struct {
	net.Conn
	commands *atomic.Int64
}

func (c countedConn) Write(p []byte) (int, error) {
	c.commands.Add(1)
	return c.Conn.Write(p)
}

var countedNets atomic.Int64

// countedNet registers a network for go-sql-driver whose connections
// count their commands into n.
func countedNet(n *atomic.Int64) string {
	name := fmt.Sprintf("retrysafe-counted-%d", countedNets.Add(1))
	mysql.RegisterDialContext(name, func(ctx context.Context, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return nil, err
		}
		return countedConn{Conn: c, commands: n}, nil
	})
	return name
}

// countedStore opens a store of one connection on a database of its own,
// its commands counted into commands, with tables parent and child;
// batched sets multiStatements and interpolateParams as Open does.
func countedStore(t *testing.T, batched bool, commands *atomic.Int64) (*store.DB, *gorm.DB) {
	t.Helper()
	cfg, err := storemysql.Config(testdb.New(t, "mysql"), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Net = countedNet(commands)
	cfg.InterpolateParams, cfg.MultiStatements = batched, batched
	connector, err := mysql.NewConnector(cfg)
	if err != nil {
		t.Fatal(err)
	}
	gdb, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: sql.OpenDB(connector)}), &gorm.Config{SkipDefaultTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	pool, _ := gdb.DB()
	pool.SetMaxOpenConns(1)
	t.Cleanup(func() { _ = pool.Close() })
	db, err := store.New(context.Background(), gdb, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		"CREATE TABLE parent (id INT PRIMARY KEY, note VARCHAR(32) NOT NULL)",
		"CREATE TABLE child (parent_id INT NOT NULL, n INT NOT NULL, PRIMARY KEY (parent_id, n))",
	} {
		if err := gdb.Exec(q).Error; err != nil {
			t.Fatal(err)
		}
	}
	return db, gdb
}

// storeWithParent1 is a countedStore that batches, with parent 1 and
// its two children committed.
func storeWithParent1(t *testing.T) (*store.DB, *gorm.DB) {
	t.Helper()
	db, gdb := countedStore(t, true, new(atomic.Int64))
	if err := db.Write(context.Background(), createLike(1, "first")); err != nil {
		t.Fatal(err)
	}
	return db, gdb
}

// sessionOf reads, on gdb's one connection, its ID and the SET statements
// it has run (Com_set_option).
func sessionOf(t *testing.T, gdb *gorm.DB) (id, sets int64) {
	t.Helper()
	var status struct {
		Value int64 `gorm:"column:Value"`
	}
	if err := gdb.Raw("SELECT CONNECTION_ID()").Scan(&id).Error; err != nil {
		t.Fatal(err)
	}
	if err := gdb.Raw("SHOW SESSION STATUS LIKE 'Com_set_option'").Scan(&status).Error; err != nil {
		t.Fatal(err)
	}
	return id, status.Value
}

// parentIDs reads the ids in parent, in order.
func parentIDs(t *testing.T, gdb *gorm.DB) []int {
	t.Helper()
	var ids []int
	if err := gdb.Table("parent").Order("id").Pluck("id", &ids).Error; err != nil {
		t.Fatal(err)
	}
	return ids
}

// createLike is the shape of a create: the row, its children and an
// audit row queued, then COMMIT.
func createLike(id int, note string) func(tx *gorm.DB) error {
	return func(tx *gorm.DB) error {
		if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{id, note}, nil); err != nil {
			return err
		}
		for n := range 2 {
			if err := pipeline.LaterExec(tx, "INSERT INTO child (parent_id, n) VALUES (?, ?)", []any{id, n}, nil); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestABatchedWriteIsOneRoundTrip: on a pool that batches, a transaction
// that queues a row and its two children costs one round trip (begin,
// inserts, COMMIT and the session's restore in one query) and commits all
// three rows; one that writes nothing sends nothing. On a pool that does
// not batch, the same transaction is a prepare and an execute a statement.
func TestABatchedWriteIsOneRoundTrip(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	for _, batched := range []bool{true, false} {
		var commands atomic.Int64
		db, gdb := countedStore(t, batched, &commands)
		if err := db.Write(ctx, createLike(1, "warm")); err != nil { // the connection is dialed
			t.Fatal(err)
		}
		before := commands.Load()
		if err := db.Write(ctx, createLike(2, "counted")); err != nil {
			t.Fatal(err)
		}
		trips := commands.Load() - before
		before = commands.Load()
		if err := db.Write(ctx, func(*gorm.DB) error { return nil }); err != nil {
			t.Fatal(err)
		}
		empty := commands.Load() - before
		var children int64
		if err := gdb.Table("child").Where("parent_id = ?", 2).Count(&children).Error; err != nil || children != 2 {
			t.Fatalf("batched %v: %d children (%v), want 2", batched, children, err)
		}
		switch {
		case batched && (trips != 1 || empty != 0):
			t.Fatalf("batched: a create-like write took %d round trips, an empty one %d; want 1 and 0", trips, empty)
		case !batched && trips < 8:
			t.Fatalf("not batched: a create-like write took %d round trips; the meter counts nothing", trips)
		}
		t.Logf("batched %v: %d round trips a create-like write, %d an empty one", batched, trips, empty)
	}
}

// TestABatchedFailureIsItsStatements: when the second of three queued
// writes fails, the error is that statement's, wrapped by its own wrap,
// nothing of the transaction commits, and the connection goes back clean
// (the next write on the one connection commits).
func TestABatchedFailureIsItsStatements(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, gdb := storeWithParent1(t)
	first, second, third := errors.New("first"), errors.New("second"), errors.New("third")
	wrapWith := func(tag error) func(error) error { return func(err error) error { return errors.Join(tag, err) } }
	err := db.Write(ctx, func(tx *gorm.DB) error {
		for _, q := range []struct {
			id  int
			tag error
		}{{5, first}, {1, second}, {6, third}} {
			if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{q.id, "x"}, wrapWith(q.tag)); err != nil {
				return err
			}
		}
		return nil
	})
	if !errors.Is(err, second) || errors.Is(err, first) || errors.Is(err, third) || !errors.Is(err, store.ErrUniqueViolation) {
		t.Fatalf("Write = %v, want the second statement's duplicate key, wrapped by its own wrap alone", err)
	}
	if ids := parentIDs(t, gdb); !slices.Equal(ids, []int{1}) {
		t.Fatalf("parent ids %v, want [1]: a statement of the failed transaction committed", ids)
	}
	if err := db.Write(ctx, createLike(7, "after")); err != nil {
		t.Fatalf("a write after the failed one: %v", err)
	}
}

// TestABatchedFailureAfterTheTransactionEndedIsUnknown: the COMMIT has no
// mark, so a failure read at a statement before it is that statement's
// only while the transaction is still open. A queued statement that ends
// the transaction and then fails (DDL commits what ran before it, then
// refuses) is read as unknown, not as its own failure: its wrap is not
// applied, and the connection is discarded, for part of the transaction
// committed.
func TestABatchedFailureAfterTheTransactionEndedIsUnknown(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, gdb := storeWithParent1(t)
	before, _ := sessionOf(t, gdb)
	row, ddl := errors.New("row"), errors.New("ddl")
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{2, "committed by the DDL"},
			func(err error) error { return errors.Join(row, err) }); err != nil {
			return err
		}
		return pipeline.LaterExec(tx, "CREATE TABLE parent (id INT PRIMARY KEY)", nil, func(err error) error { return errors.Join(ddl, err) })
	})
	var myErr *mysql.MySQLError
	if !errors.As(err, &myErr) || myErr.Number != 1050 || errors.Is(err, ddl) || errors.Is(err, row) {
		t.Fatalf("Write = %v, want the server's 1050 read as unknown, with no statement's wrap", err)
	}
	if ids := parentIDs(t, gdb); !slices.Equal(ids, []int{1, 2}) {
		t.Fatalf("parent ids %v, want [1 2]: the DDL's implicit commit committed row 2", ids)
	}
	if after, _ := sessionOf(t, gdb); after == before {
		t.Fatalf("connection %d kept after an unknown outcome, want it discarded", after)
	}
	if err := db.Write(ctx, createLike(3, "after")); err != nil {
		t.Fatalf("a write after the unknown one: %v", err)
	}
}

// TestTheFirstWriteAfterTheBeginIsReadAsItsOwn: the first write after
// START TRANSACTION carries a mark of its own when the transaction goes
// whole as one statement, and the begin's SET assigns it when the begin
// goes out before the COMMIT (here with a read after the write). A
// failure of that write, a duplicate key or a missing table (raised
// before its values are read), is read as its own either way: wrapped by
// its wrap, rolled back, the connection kept. A create-like transaction
// (a row and two child rows) sends four SETs on the server: SET
// TRANSACTION and the three rows' marks.
func TestTheFirstWriteAfterTheBeginIsReadAsItsOwn(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, gdb := storeWithParent1(t)
	session := func() (id, sets int64) { return sessionOf(t, gdb) }
	conn, before := session()
	if err := db.Write(ctx, createLike(2, "second")); err != nil {
		t.Fatal(err)
	}
	if id, after := session(); id != conn || after-before != 4 {
		t.Fatalf("a create-like write sent %d SETs on connection %d (was %d), want 4 on the same one", after-before, id, conn)
	}
	for _, c := range []struct {
		name, sql string
		number    uint16
	}{
		{"a duplicate row", "INSERT INTO parent (id, note) VALUES (1, 'again')", 1062},
		{"a missing table", "INSERT INTO missing (id) VALUES (1)", 1146},
	} {
		for _, read := range []bool{false, true} {
			tag := errors.New(c.name)
			err := db.Write(ctx, func(tx *gorm.DB) error {
				if err := pipeline.LaterExec(tx, c.sql, nil, func(err error) error { return errors.Join(tag, err) }); err != nil {
					return err
				}
				if read { // the begin, the write and the read go out together
					var one int
					if err := tx.Raw("SELECT 1").Scan(&one).Error; err != nil {
						return err
					}
				}
				return pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{9, "after it"}, nil)
			})
			var myErr *mysql.MySQLError
			if !errors.Is(err, tag) || !errors.As(err, &myErr) || myErr.Number != c.number {
				t.Fatalf("%s (read %v): Write = %v, want its %d wrapped by its own wrap", c.name, read, err, c.number)
			}
			if id, _ := session(); id != conn {
				t.Fatalf("%s (read %v): connection %d after a known failure, want %d kept", c.name, read, id, conn)
			}
		}
	}
	if ids := parentIDs(t, gdb); !slices.Equal(ids, []int{1, 2}) {
		t.Fatalf("parent ids %v, want [1 2]: a statement of a failed transaction committed", ids)
	}
}

// TestABatchedOutboxFailureIsItsStatement: the outbox's two statements
// carry their marks in their first values instead of a SET each. A
// failure of either is still read as its own (the event's duplicate ID as
// the event's insert, an aggregate ID too long as the counter's upsert),
// one of a SET-marked statement queued after them as that statement's,
// and nothing of the failed transaction commits; a transaction that
// fails nowhere numbers its events 1, 2 per aggregate.
func TestABatchedOutboxFailureIsItsStatement(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, gdb := countedStore(t, true, new(atomic.Int64))
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	now := time.Now().UTC().Truncate(time.Microsecond)
	event := func(id, aggregate string) store.OutboxWriteEvent {
		return store.OutboxWriteEvent{ID: id, Tenant: "acme", Type: "thing.done", AggregateType: "thing", AggregateID: aggregate,
			Payload: `{}`, Headers: `{}`, CreatedAt: now}
	}
	later := func(tx *gorm.DB, events ...store.OutboxWriteEvent) error {
		_, err := db.Driver.Outbox().Write(ctx, tx, store.OutboxWriteParams{Events: events, Later: true})
		return err
	}
	parent := errors.New("parent")
	wrapParent := func(err error) error { return errors.Join(parent, err) }
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{1, "first"}, wrapParent); err != nil {
			return err
		}
		return later(tx, event("00000000-0000-4000-8000-000000000001", "a"), event("00000000-0000-4000-8000-000000000002", "a"))
	}); err != nil {
		t.Fatal(err)
	}
	number := func(code uint16, err error) bool {
		var myErr *mysql.MySQLError
		return errors.As(err, &myErr) && myErr.Number == code
	}
	for _, c := range []struct {
		name   string
		write  func(tx *gorm.DB) error
		wanted func(err error) bool
	}{
		{"the event's duplicate ID", func(tx *gorm.DB) error {
			if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{2, "x"}, wrapParent); err != nil {
				return err
			}
			return later(tx, event("00000000-0000-4000-8000-000000000003", "b"), event("00000000-0000-4000-8000-000000000001", "c"))
		}, func(err error) bool {
			return number(1062, err) && strings.Contains(err.Error(), "outbox: write thing.done") &&
				!strings.Contains(err.Error(), "outbox: sequence") && !errors.Is(err, parent)
		}},
		{"the counter's aggregate ID too long", func(tx *gorm.DB) error {
			if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{2, "x"}, wrapParent); err != nil {
				return err
			}
			return later(tx, event("00000000-0000-4000-8000-000000000003", "b"), event("00000000-0000-4000-8000-000000000004", strings.Repeat("z", 256)))
		}, func(err error) bool {
			return number(1406, err) && strings.Contains(err.Error(), "outbox: sequence of thing "+strings.Repeat("z", 256)) &&
				!strings.Contains(err.Error(), "outbox: write") && !errors.Is(err, parent)
		}},
		{"a duplicate row after the events", func(tx *gorm.DB) error {
			if err := later(tx, event("00000000-0000-4000-8000-000000000003", "b")); err != nil {
				return err
			}
			return pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{1, "again"}, wrapParent)
		}, func(err error) bool {
			return number(1062, err) && errors.Is(err, parent) && errors.Is(err, store.ErrUniqueViolation) && !strings.Contains(err.Error(), "outbox")
		}},
	} {
		err := db.Write(ctx, c.write)
		if !c.wanted(err) {
			t.Fatalf("%s: Write = %v", c.name, err)
		}
		var parents, events, counters int64
		if err := gdb.Table("parent").Count(&parents).Error; err != nil {
			t.Fatal(err)
		}
		if err := gdb.Table("outbox_events").Count(&events).Error; err != nil {
			t.Fatal(err)
		}
		if err := gdb.Table("outbox_sequences").Count(&counters).Error; err != nil {
			t.Fatal(err)
		}
		if parents != 1 || events != 2 || counters != 1 {
			t.Fatalf("%s: %d parents, %d events, %d counters after the failed write, want 1, 2, 1", c.name, parents, events, counters)
		}
	}
	var seqs []int64
	if err := gdb.Table("outbox_events").Order("position").Pluck("seq", &seqs).Error; err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(seqs, []int64{1, 2}) {
		t.Fatalf("seq %v, want [1 2]", seqs)
	}
	if err := db.Write(ctx, createLike(7, "after")); err != nil {
		t.Fatalf("a write after the failed ones: %v", err)
	}

	// The counter refused before its values are read (its table is gone),
	// as the first statement of the COMMIT's query: its mark is an earlier
	// query's, read as unknown, and the transaction still does not commit.
	if err := gdb.Exec("RENAME TABLE outbox_sequences TO outbox_sequences_away").Error; err != nil {
		t.Fatal(err)
	}
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec("INSERT INTO parent (id, note) VALUES (?, ?)", 8, "sent before").Error; err != nil {
			return err
		}
		return later(tx, event("00000000-0000-4000-8000-000000000005", "d"))
	})
	if !number(1146, err) {
		t.Fatalf("Write with the counter's table gone = %v, want its error 1146", err)
	}
	if err := gdb.Exec("RENAME TABLE outbox_sequences_away TO outbox_sequences").Error; err != nil {
		t.Fatal(err)
	}
	var eight int64
	if err := gdb.Table("parent").Where("id = ?", 8).Count(&eight).Error; err != nil || eight != 0 {
		t.Fatalf("%d parent rows 8 (%v): the failed transaction's row committed", eight, err)
	}
	if err := db.Write(ctx, createLike(9, "after the unknown")); err != nil {
		t.Fatalf("a write after the failed one: %v", err)
	}
}

// TestAQueryAfterAQueuedReturningReadsItsOwnRows: a queued write that
// returns rows (RETURNING) goes out before a query, not in its round
// trip, where the query would read the write's rows as its own.
func TestAQueryAfterAQueuedReturningReadsItsOwnRows(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	var commands atomic.Int64
	db, _ := countedStore(t, true, &commands)
	if err := db.Write(ctx, createLike(1, "first")); err != nil {
		t.Fatal(err)
	}
	type child struct {
		ParentID int `gorm:"column:parent_id"`
		N        int `gorm:"column:n"`
	}
	var got []child
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.LaterSQL(tx, "INSERT INTO parent (id, note) VALUES (?, ?) RETURNING id, note", []any{2, "returning"}, nil); err != nil {
			return err
		}
		return pipeline.Find(tx, func(db *gorm.DB) *gorm.DB {
			return db.Table("child").Where("parent_id = ?", 1).Order("n").Find(&got)
		}).Error
	}); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, []child{{1, 0}, {1, 1}}) {
		t.Fatalf("the query read %v, want the two children of parent 1", got)
	}
}

// TestABatchedCommitOnAKilledConnectionIsUnavailable: when the server
// kills the transaction's connection between its round trips (an
// administrator's KILL, a server that drops it), the batch that carries
// the COMMIT fails as unavailable (503 upstream), never as a success;
// nothing of the transaction commits, and the pool serves the next write
// on a new connection.
func TestABatchedCommitOnAKilledConnectionIsUnavailable(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	dsn := testdb.New(t, "mysql")
	pool, err := storemysql.OpenDB(dsn, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pool.Close() })
	admin, err := storemysql.OpenDB(dsn, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	gdb, err := gorm.Open(gormmysql.New(gormmysql.Config{Conn: pool}), &gorm.Config{SkipDefaultTransaction: true})
	if err != nil {
		t.Fatal(err)
	}
	db, err := store.New(ctx, gdb, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("CREATE TABLE parent (id INT PRIMARY KEY, note VARCHAR(32) NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{1, "sent"}, nil); err != nil {
			return err
		}
		var id int64 // goes out with the begin and the insert
		if err := tx.Raw("SELECT CONNECTION_ID()").Scan(&id).Error; err != nil {
			return err
		}
		if _, err := admin.ExecContext(ctx, "KILL CONNECTION "+strconv.FormatInt(id, 10)); err != nil {
			return err
		}
		return pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{2, "queued"}, nil)
	})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Write on a killed connection = %v, want ErrUnavailable", err)
	}
	var n int64
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM parent").Scan(&n); err != nil || n != 0 {
		t.Fatalf("%d rows (%v) of the killed transaction committed, want 0", n, err)
	}
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		return pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{3, "after"}, nil)
	}); err != nil {
		t.Fatalf("a write after the killed one: %v", err)
	}
	if err := admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM parent").Scan(&n); err != nil || n != 1 {
		t.Fatalf("%d rows (%v) after the next write, want 1", n, err)
	}
}

// questionsOf reads, on gdb's one connection, the statements its clients
// sent (Questions: a compound statement counts once, not the statements
// inside it; the read itself counts one).
func questionsOf(t *testing.T, gdb *gorm.DB) int64 {
	t.Helper()
	var status struct {
		Value int64 `gorm:"column:Value"`
	}
	if err := gdb.Raw("SHOW SESSION STATUS LIKE 'Questions'").Scan(&status).Error; err != nil {
		t.Fatal(err)
	}
	return status.Value
}

// TestAWriteIsOneStatement: a create-like write's one round trip sends the
// whole transaction, its settings, START and COMMIT, as one compound
// statement: MariaDB answers one statement, not nine, and all three rows
// commit. When a read sent the begin earlier, the COMMIT's round trip is
// the rest as one compound statement and the session's restore: two. A
// batch holding a statement a compound statement must not hold (DDL)
// goes as separate statements.
func TestAWriteIsOneStatement(t *testing.T) {
	testdb.MySQL(t)
	t.Parallel()
	ctx := context.Background()
	db, gdb := storeWithParent1(t)
	before := questionsOf(t, gdb)
	if err := db.Write(ctx, createLike(2, "second")); err != nil {
		t.Fatal(err)
	}
	if n := questionsOf(t, gdb) - before - 1; n != 1 {
		t.Fatalf("a create-like write was %d statements, want 1 (one compound statement)", n)
	}
	if ids := parentIDs(t, gdb); !slices.Equal(ids, []int{1, 2}) {
		t.Fatalf("parent ids %v, want [1 2]", ids)
	}
	var children int64
	if err := gdb.Raw("SELECT count(*) FROM child WHERE parent_id = 2").Scan(&children).Error; err != nil || children != 2 {
		t.Fatalf("children of 2: %d, %v; want 2", children, err)
	}
	before = questionsOf(t, gdb)
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		var one int // the begin goes out with the read: 3 statements
		if err := tx.Raw("SELECT 1").Scan(&one).Error; err != nil {
			return err
		}
		return createLike(4, "after a read")(tx)
	}); err != nil {
		t.Fatal(err)
	}
	if n := questionsOf(t, gdb) - before - 1; n != 3+2 {
		t.Fatalf("a create-like write after a read was %d statements, want 5 (the begin's SET, START and the read; "+
			"one compound statement and the restore)", n)
	}
	before = questionsOf(t, gdb)
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := pipeline.LaterExec(tx, "INSERT INTO parent (id, note) VALUES (?, ?)", []any{3, "third"}, nil); err != nil {
			return err
		}
		return pipeline.LaterExec(tx, "CREATE TABLE IF NOT EXISTS child (parent_id INT NOT NULL, n INT NOT NULL)", nil, nil)
	}); err != nil {
		t.Fatal(err)
	}
	if n := questionsOf(t, gdb) - before - 1; n < 6 {
		t.Fatalf("a write holding DDL was %d statements, want each on its own", n)
	}
}
