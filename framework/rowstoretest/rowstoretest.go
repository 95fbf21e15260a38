package rowstoretest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

// Widget is the suite's resource model: a unique name per tenant and child
// rows.
type Widget struct {
	collection.System
	Name  string `gorm:"not null;uniqueIndex:idx_widgets_name,expression:tenant_id,priority:1;uniqueIndex:idx_widgets_name,priority:2"`
	Color string `gorm:"not null;index:idx_widgets_color,expression:tenant_id,priority:1;index:idx_widgets_color,priority:2"`
	Parts []Part `gorm:"foreignKey:TenantID,WidgetID;references:TenantID,ID"`
}

// Part is a child row of a [Widget].
type Part struct {
	TenantID string    `gorm:"primaryKey"`
	WidgetID uuid.UUID `gorm:"primaryKey;type:uuid"`
	Position int       `gorm:"primaryKey;autoIncrement:false"`
	Label    string    `gorm:"not null"`
}

var (
	parts   = collection.ChildTable{Table: "parts", ParentColumn: "widget_id"}
	preload = []collection.Preload{{Field: "Parts", OrderBy: "position"}}
	columns = []string{"version", "status", "fingerprint", "updated_at", "name", "color"}
)

func widget(tenant string, id uuid.UUID, name string, at time.Time) *Widget {
	return &Widget{System: collection.System{TenantID: tenant, ID: id, Version: 1, Status: "active",
		CreateFingerprint: "v1:create", Fingerprint: "v1:create", CreatedAt: at, UpdatedAt: at}, Name: name, Color: "red"}
}

// Run runs the contract on fresh databases from open, a parallel subtest
// per concern.
func Run(t *testing.T, open func(t *testing.T) *store.DB, newStore func(store.Driver) collection.RowStore) {
	t.Helper()
	s := suite{open: open, newStore: newStore, ctx: context.Background(), now: time.Now().UTC().Truncate(time.Microsecond)}
	for _, tc := range []struct {
		name string
		run  func(*testing.T)
	}{
		{"InsertOnConflict", s.testInsertOnConflict},
		{"CreateOfANewKey", s.testCreateOfANewKey},
		{"ConcurrentInsertsOfOneKey", s.testConcurrentInsertsOfOneKey},
		{"ReadTheDatabaseClock", s.testReadTheDatabaseClock},
		{"ReadAndLockedRead", s.testReadAndLockedRead},
		{"FencedUpdate", s.testFencedUpdate},
		{"ChildRows", s.testChildRows},
		{"ChildRowsOfTheVersionRead", s.testChildRowsOfTheVersionRead},
		{"ChildRowErrorStopsTheCommit", s.testChildRowErrorStopsTheCommit},
		{"TombstoneAndPurge", s.testTombstoneAndPurge},
		{"ListPaging", s.testListPaging},
	} {
		t.Run(tc.name, tc.run)
	}
}

// suite is one run of the contract: where its databases come from, and
// the time its rows are written at.
type suite struct {
	open     func(t *testing.T) *store.DB
	newStore func(store.Driver) collection.RowStore
	ctx      context.Context
	now      time.Time
}

// setup opens a fresh database with the contract's tables.
func (s suite) setup(t *testing.T) (*store.DB, collection.RowStore) {
	t.Helper()
	db := s.open(t)
	if err := db.Gorm.AutoMigrate(&Widget{}, &Part{}); err != nil {
		t.Fatalf("AutoMigrate: %v", err)
	}
	return db, s.newStore(db.Driver)
}

func (s suite) testInsertOnConflict(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	insert := func(w *Widget) bool {
		t.Helper()
		ok, err := rs.Insert(ctx, db.Gorm, collection.InsertRowParams{Table: "widgets", Row: w})
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		return ok
	}
	if !insert(widget("t1", id, "a", now)) {
		t.Fatal("first insert did not insert")
	}
	if insert(widget("t1", id, "b", now.Add(time.Second))) {
		t.Fatal("second insert of the key inserted")
	}
	if !insert(widget("t2", id, "a", now)) {
		t.Fatal("the same ID in another tenant did not insert")
	}
	got := read(t, db, rs, "t1", id, false)
	if got.Name != "a" || !got.CreatedAt.Equal(now) {
		t.Fatalf("the conflicting insert changed the row: %+v", got)
	}
	_, err := rs.Insert(ctx, db.Gorm, collection.InsertRowParams{Table: "widgets", Row: widget("t1", uuid.New(), "a", now)})
	if !errors.Is(err, collection.ErrUniqueViolation) {
		t.Fatalf("a duplicate unique name = %v, want ErrUniqueViolation", err)
	}
	// A text the database cannot store (PostgreSQL: NUL) is refused as
	// ErrUnstorableText, or stored.
	_, err = rs.Insert(ctx, db.Gorm, collection.InsertRowParams{Table: "widgets", Row: widget("t1", uuid.New(), "nul\x00name", now)})
	if err != nil && !errors.Is(err, collection.ErrUnstorableText) {
		t.Fatalf("a NUL in a text = %v, want nil or ErrUnstorableText", err)
	}
}

func (s suite) testCreateOfANewKey(t *testing.T) {
	ctx, now := s.ctx, s.now
	// Create is a plain INSERT that may travel with the commit: a new
	// key commits; a key that exists fails the transaction with
	// ErrUniqueViolation (from Create or from Write) and nothing of
	// the transaction commits, the existing row unchanged.
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		return rs.Create(ctx, tx, collection.InsertRowParams{Table: "widgets", Row: widget("t1", id, "a", now)})
	}); err != nil {
		t.Fatalf("Create of a new key: %v", err)
	}
	if got := read(t, db, rs, "t1", id, false); got.Name != "a" || got.Version != 1 {
		t.Fatalf("created row: %+v", got)
	}
	other := uuid.New()
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if _, err := rs.Insert(ctx, tx, collection.InsertRowParams{Table: "widgets", Row: widget("t1", other, "o", now)}); err != nil {
			return err
		}
		return rs.Create(ctx, tx, collection.InsertRowParams{Table: "widgets", Row: widget("t1", id, "b", now)})
	})
	if !errors.Is(err, collection.ErrUniqueViolation) {
		t.Fatalf("Create of an existing key = %v, want ErrUniqueViolation", err)
	}
	if got := read(t, db, rs, "t1", id, false); got.Name != "a" {
		t.Fatalf("Create of an existing key changed it: %+v", got)
	}
	var w Widget
	if ok, err := rs.Read(ctx, db.Gorm, collection.ReadRowParams{Key: key("t1", other), Dest: &w}); ok || err != nil {
		t.Fatalf("the transaction of a failed Create committed: %t, %v", ok, err)
	}
}

func (s suite) testConcurrentInsertsOfOneKey(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	const n = 10
	inserted := make([]bool, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = db.Write(ctx, func(tx *gorm.DB) error {
				var err error
				inserted[i], err = rs.Insert(ctx, tx, collection.InsertRowParams{Table: "widgets", Row: widget("t1", id, fmt.Sprint("w", i), now)})
				return err
			})
		})
	}
	wg.Wait()
	count := 0
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("insert %d: %v", i, errs[i])
		}
		if inserted[i] {
			count++
		}
	}
	if count != 1 {
		t.Fatalf("%d concurrent inserts of one key inserted, want 1", count)
	}
}

func (s suite) testReadTheDatabaseClock(t *testing.T) {
	ctx, now := s.ctx, s.now
	// Every kind of read reports the database clock when asked, found
	// or not, in UTC and in order.
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, widget("t1", id, "a", now))
	insertParts(t, db, rs, id, "x")
	var last time.Time
	check := func(name string, p collection.ReadRowParams, tx *gorm.DB, wantFound bool) {
		t.Helper()
		var at time.Time
		p.Dest, p.Now = &Widget{}, &at
		found, err := rs.Read(ctx, tx, p)
		if err != nil || found != wantFound {
			t.Fatalf("%s: Read = %t, %v, want %t", name, found, err, wantFound)
		}
		// The database runs beside the test: its clock is the host's,
		// to well within an hour (a time zone read wrong is hours off).
		if at.Location() != time.UTC || at.Before(last) || at.Sub(time.Now()).Abs() > time.Hour {
			t.Fatalf("%s: the database clock read %v, after %v", name, at, last)
		}
		last = at
	}
	check("a miss", collection.ReadRowParams{Key: key("t1", uuid.New())}, db.Gorm, false)
	check("another tenant's row", collection.ReadRowParams{Key: key("t2", id)}, db.Gorm, false)
	check("a row", collection.ReadRowParams{Key: key("t1", id)}, db.Gorm, true)
	check("a row with its child rows", collection.ReadRowParams{Key: key("t1", id), Preload: preload}, db.Gorm, true)
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		check("a miss in a transaction", collection.ReadRowParams{Key: key("t1", uuid.New())}, tx, false)
		check("a row in a transaction", collection.ReadRowParams{Key: key("t1", id), LiveOnly: true}, tx, true)
		check("a locked read", collection.ReadRowParams{Key: key("t1", id), ForUpdate: true, Preload: preload}, tx, true)
		check("a locked miss", collection.ReadRowParams{Key: key("t1", uuid.New()), ForUpdate: true}, tx, false)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (s suite) testReadAndLockedRead(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, widget("t1", id, "a", now))
	var w Widget
	if ok, err := rs.Read(ctx, db.Gorm, collection.ReadRowParams{Key: key("t2", id), Dest: &w}); ok || err != nil {
		t.Fatalf("Read of another tenant's row = %t, %v", ok, err)
	}
	// A locked read holds the row: a concurrent fenced update waits
	// for it and then finds the version moved on.
	locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Write(ctx, func(tx *gorm.DB) error {
			var cur Widget
			if ok, err := rs.Read(ctx, tx, collection.ReadRowParams{Key: key("t1", id), Dest: &cur, ForUpdate: true}); !ok || err != nil {
				return fmt.Errorf("locked read = %t, %w", ok, err)
			}
			close(locked)
			<-release
			cur.Version, cur.Name = 2, "by-lock-holder"
			ok, err := rs.Update(ctx, tx, collection.UpdateRowParams{Key: key("t1", id), Version: 1, Row: &cur, Columns: columns})
			if !ok || err != nil {
				return fmt.Errorf("lock holder's update = %t, %w", ok, err)
			}
			return nil
		})
	}()
	<-locked
	second := make(chan error, 1)
	go func() {
		second <- db.Write(ctx, func(tx *gorm.DB) error {
			next := widget("t1", id, "by-waiter", now)
			next.Version = 2
			ok, err := rs.Update(ctx, tx, collection.UpdateRowParams{Key: key("t1", id), Version: 1, Row: next, Columns: columns})
			if err == nil && ok {
				return errors.New("the waiter's fenced update applied over the lock holder's")
			}
			return err
		})
	}()
	time.Sleep(50 * time.Millisecond)
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if err := <-second; err != nil && !errors.Is(err, store.ErrLockTimeout) {
		t.Fatal(err)
	}
	if got := read(t, db, rs, "t1", id, false); got.Name != "by-lock-holder" || got.Version != 2 {
		t.Fatalf("row = %+v", got)
	}
}

func (s suite) testFencedUpdate(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, widget("t1", id, "a", now))
	next := widget("t1", id, "b", now)
	next.Version, next.Fingerprint, next.UpdatedAt = 2, "v1:next", now.Add(time.Minute)
	if ok, err := rs.Update(ctx, db.Gorm, collection.UpdateRowParams{Key: key("t1", id), Version: 1, Row: next, Columns: columns}); !ok || err != nil {
		t.Fatalf("Update = %t, %v", ok, err)
	}
	stale := widget("t1", id, "c", now)
	if ok, err := rs.Update(ctx, db.Gorm, collection.UpdateRowParams{Key: key("t1", id), Version: 1, Row: stale, Columns: columns}); ok || err != nil {
		t.Fatalf("stale Update = %t, %v", ok, err)
	}
	got := read(t, db, rs, "t1", id, false)
	if got.Name != "b" || got.Version != 2 || got.Fingerprint != "v1:next" || got.CreateFingerprint != "v1:create" || !got.CreatedAt.Equal(now) || !got.UpdatedAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("row after updates: %+v", got)
	}
	other := widget("t1", uuid.New(), "z", now)
	mustInsert(t, db, rs, other)
	other.Name, other.Version = "b", 2
	if _, err := rs.Update(ctx, db.Gorm, collection.UpdateRowParams{Key: key("t1", other.ID), Version: 1, Row: other, Columns: columns}); !errors.Is(err, collection.ErrUniqueViolation) {
		t.Fatalf("Update to a taken unique name = %v, want ErrUniqueViolation", err)
	}
}

func (s suite) testChildRows(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, widget("t1", id, "a", now))
	insertParts(t, db, rs, id, "x", "y", "z")
	if got := read(t, db, rs, "t1", id, true); len(got.Parts) != 3 || got.Parts[0].Label != "x" || got.Parts[2].Label != "z" {
		t.Fatalf("preloaded parts: %+v", got.Parts)
	}
	if err := rs.DeleteChildren(ctx, db.Gorm, collection.ChildRowsParams{ChildTable: parts, Tenant: "t1", ParentID: id}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, db, rs, "t1", id, true); len(got.Parts) != 0 {
		t.Fatalf("parts after DeleteChildren: %+v", got.Parts)
	}
}

func (s suite) testChildRowsOfTheVersionRead(t *testing.T) {
	ctx, now := s.ctx, s.now
	// Replaces rewrite the row and its child rows in one transaction
	// while readers read both: every read must pair a version with that
	// version's child rows (version v has v parts labelled "v").
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, widget("t1", id, "a", now))
	insertParts(t, db, rs, id, "1")
	const versions = 30
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for v := int64(2); v <= versions; v++ {
			next := widget("t1", id, "a", now)
			next.Version = v
			label := fmt.Sprint(v)
			rows := make([]Part, v)
			for i := range rows {
				rows[i] = Part{TenantID: "t1", WidgetID: id, Position: i, Label: label}
			}
			err := db.Write(ctx, func(tx *gorm.DB) error {
				if ok, err := rs.Update(ctx, tx, collection.UpdateRowParams{Key: key("t1", id), Version: v - 1, Row: next, Columns: columns}); !ok || err != nil {
					return fmt.Errorf("update to %d = %t, %w", v, ok, err)
				}
				if err := rs.DeleteChildren(ctx, tx, collection.ChildRowsParams{ChildTable: parts, Tenant: "t1", ParentID: id}); err != nil {
					return err
				}
				return rs.InsertChildren(ctx, tx, collection.ChildRowsParams{ChildTable: parts, Tenant: "t1", ParentID: id, Rows: &rows})
			})
			if err != nil {
				t.Errorf("replace: %v", err)
				return
			}
		}
	})
	// The reader stops at its first bad read and waits for the
	// writer, so that nothing reports after the test has ended.
	reads, bad := 0, ""
	for stop := false; !stop && bad == ""; reads++ {
		select {
		case <-done:
			stop = true
		default:
		}
		var got Widget
		ok, err := rs.Read(ctx, db.Gorm, collection.ReadRowParams{Key: key("t1", id), Dest: &got, Preload: preload})
		if reads%2 == 1 {
			// Every other read is a list page of the one row.
			var page []Widget
			err = rs.List(ctx, db.Gorm, collection.ListRowsParams{Table: "widgets", Tenant: "t1", Limit: 10, Dest: &page, Preload: preload})
			if ok = len(page) == 1; ok {
				got = page[0]
			}
		}
		var fe *framework.Error
		if errors.As(err, &fe) && fe.Code == wire.CodeRequestInProgress {
			continue // kept changing while read: refused, not torn
		}
		switch {
		case !ok || err != nil:
			bad = fmt.Sprintf("Read = %t, %v", ok, err)
		case int64(len(got.Parts)) != got.Version:
			bad = fmt.Sprintf("version %d read with %d parts", got.Version, len(got.Parts))
		default:
			for _, part := range got.Parts {
				if part.Label != fmt.Sprint(got.Version) {
					bad = fmt.Sprintf("version %d read with a part of version %s", got.Version, part.Label)
				}
			}
		}
	}
	wg.Wait()
	if bad != "" {
		t.Fatal(bad)
	}
	if got := read(t, db, rs, "t1", id, true); got.Version != versions {
		t.Fatalf("final version %d, want %d (after %d reads)", got.Version, versions, reads)
	}
}

func (s suite) testChildRowErrorStopsTheCommit(t *testing.T) {
	ctx, now := s.ctx, s.now
	// InsertChildren may send its statement with the commit: a
	// violation must still reach the caller (from InsertChildren or
	// from Write), wrapped, and nothing of the transaction commits.
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, widget("t1", id, "a", now))
	other := uuid.New()
	dup := []Part{{TenantID: "t1", WidgetID: id, Position: 0, Label: "x"}, {TenantID: "t1", WidgetID: id, Position: 0, Label: "y"}}
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if _, err := rs.Insert(ctx, tx, collection.InsertRowParams{Table: "widgets", Row: widget("t1", other, "b", now)}); err != nil {
			return err
		}
		return rs.InsertChildren(ctx, tx, collection.ChildRowsParams{ChildTable: parts, Tenant: "t1", ParentID: id, Rows: &dup})
	})
	if !errors.Is(err, collection.ErrUniqueViolation) {
		t.Fatalf("Write with duplicate child rows = %v, want ErrUniqueViolation", err)
	}
	var w Widget
	if ok, err := rs.Read(ctx, db.Gorm, collection.ReadRowParams{Key: key("t1", other), Dest: &w}); ok || err != nil {
		t.Fatalf("the row inserted with failing child rows was committed: %t, %v", ok, err)
	}
	if got := read(t, db, rs, "t1", id, true); len(got.Parts) != 0 {
		t.Fatalf("parts committed: %+v", got.Parts)
	}
}

func (s suite) testTombstoneAndPurge(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id, live := uuid.New(), uuid.New()
	mustInsert(t, db, rs, widget("t1", id, "a", now))
	mustInsert(t, db, rs, widget("t1", live, "b", now))
	insertParts(t, db, rs, id, "x", "y")
	insertParts(t, db, rs, live, "x")
	if ok, err := rs.Tombstone(ctx, db.Gorm, collection.TombstoneParams{Key: key("t1", id), Version: 7}); ok || err != nil {
		t.Fatalf("Tombstone fenced on a stale version = %t, %v", ok, err)
	}
	before := clock(t, db, rs)
	if ok, err := rs.Tombstone(ctx, db.Gorm, collection.TombstoneParams{Key: key("t1", id), Version: 1}); !ok || err != nil {
		t.Fatalf("Tombstone = %t, %v", ok, err)
	}
	after := clock(t, db, rs)
	if ok, err := rs.Tombstone(ctx, db.Gorm, collection.TombstoneParams{Key: key("t1", id)}); ok || err != nil {
		t.Fatalf("second Tombstone = %t, %v", ok, err)
	}
	// Stamped with the database clock of the statement.
	got := read(t, db, rs, "t1", id, false)
	if got.DeletedAt == nil || got.DeletedAt.Before(before) || got.DeletedAt.After(after) || got.Version != 2 || !got.UpdatedAt.Equal(*got.DeletedAt) {
		t.Fatalf("tombstone: %+v, want deleted_at = updated_at in [%v, %v]", got, before, after)
	}
	at := *got.DeletedAt
	var w Widget
	if ok, err := rs.Read(ctx, db.Gorm, collection.ReadRowParams{Key: key("t1", id), Dest: &w, LiveOnly: true}); ok || err != nil {
		t.Fatalf("LiveOnly read of a tombstone = %t, %v", ok, err)
	}
	// A live row is never purged, nor are its child rows.
	if ok, err := rs.PurgeTombstone(ctx, db.Gorm, collection.PurgeParams{Key: key("t1", live), Children: []collection.ChildTable{parts},
		DeletedBefore: at.Add(time.Hour)}); ok || err != nil {
		t.Fatalf("PurgeTombstone of a live row = %t, %v", ok, err)
	}
	if got := read(t, db, rs, "t1", live, true); len(got.Parts) != 1 {
		t.Fatalf("purge of a live row touched it: %+v", got)
	}
	// A tombstone newer than the cutoff (one written after the purge was
	// decided) is kept, with its child rows.
	if ok, err := rs.PurgeTombstone(ctx, db.Gorm, collection.PurgeParams{Key: key("t1", id), Children: []collection.ChildTable{parts},
		DeletedBefore: at.Add(-time.Millisecond)}); ok || err != nil {
		t.Fatalf("PurgeTombstone of a tombstone newer than the cutoff = %t, %v", ok, err)
	}
	if got := read(t, db, rs, "t1", id, false); got.DeletedAt == nil {
		t.Fatalf("a tombstone newer than the cutoff was purged")
	}
	err := db.Write(ctx, func(tx *gorm.DB) error {
		ok, err := rs.PurgeTombstone(ctx, tx, collection.PurgeParams{Key: key("t1", id), Children: []collection.ChildTable{parts},
			DeletedBefore: at.Add(time.Millisecond)})
		if err == nil && !ok {
			err = errors.New("PurgeTombstone of a tombstone purged nothing")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := rs.Read(ctx, db.Gorm, collection.ReadRowParams{Key: key("t1", id), Dest: &Widget{}}); ok || err != nil {
		t.Fatalf("purged row still read: %t, %v", ok, err)
	}
	var n int64
	if err := db.Gorm.Table("parts").Where("widget_id = ?", id).Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("purged row left %d parts (%v)", n, err)
	}
	// The ID is free again.
	mustInsert(t, db, rs, widget("t1", id, "a", now))
}

func (s suite) testListPaging(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	var want []uuid.UUID // newest first
	for i := range 23 {
		// Groups of three share a created_at: ties are broken by id.
		w := widget("t1", uuid.New(), fmt.Sprint("w", i), now.Add(time.Duration(i/3)*time.Millisecond))
		if i%2 == 0 {
			w.Color = "blue"
		}
		mustInsert(t, db, rs, w)
		insertParts(t, db, rs, w.ID, "p")
	}
	mustInsert(t, db, rs, widget("t2", uuid.New(), "other tenant", now))
	tomb := widget("t1", uuid.New(), "deleted", now)
	mustInsert(t, db, rs, tomb)
	if ok, err := rs.Tombstone(ctx, db.Gorm, collection.TombstoneParams{Key: key("t1", tomb.ID)}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var all []Widget
	if err := rs.List(ctx, db.Gorm, collection.ListRowsParams{Table: "widgets", Tenant: "t1", Limit: 100, Dest: &all}); err != nil {
		t.Fatal(err)
	}
	if len(all) != 23 {
		t.Fatalf("listed %d rows, want the tenant's 23 live ones", len(all))
	}
	// Ties are broken by ID in the database's order of IDs, which is
	// the text's on PostgreSQL and SQLite, not on MariaDB's UUID type.
	notDescending := func(a, b uuid.UUID) bool {
		var not bool
		if err := db.Gorm.Raw("SELECT count(*) = 2 FROM widgets WHERE tenant_id = 't1' AND id IN (?, ?) AND id >= ?", a, b, a).
			Scan(&not).Error; err != nil {
			t.Fatal(err)
		}
		return not
	}
	for i := 1; i < len(all); i++ {
		a, b := all[i-1].System, all[i].System
		if a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && notDescending(a.ID, b.ID) {
			t.Fatalf("not newest first at %d: %v %v / %v %v", i, a.CreatedAt, a.ID, b.CreatedAt, b.ID)
		}
		want = append(want, a.ID)
	}
	want = append(want, all[len(all)-1].ID)

	for _, filters := range [][]collection.ColumnFilter{nil, {{Column: "color", Value: "blue"}}} {
		var seen []uuid.UUID
		var after *collection.ListPosition
		for pages := 0; ; pages++ {
			if pages > 30 {
				t.Fatal("paging does not end")
			}
			var page []Widget
			if err := rs.List(ctx, db.Gorm, collection.ListRowsParams{Table: "widgets", Tenant: "t1", Filters: filters,
				After: after, Limit: 4, Dest: &page, Preload: preload}); err != nil {
				t.Fatal(err)
			}
			for _, w := range page {
				if len(w.Parts) != 1 || filters != nil && w.Color != "blue" {
					t.Fatalf("listed row %+v", w)
				}
				seen = append(seen, w.ID)
			}
			if len(page) < 4 {
				break
			}
			last := page[len(page)-1].System
			after = &collection.ListPosition{CreatedAt: last.CreatedAt, ID: last.ID}
		}
		expect := want
		if filters != nil {
			expect = nil
			for _, w := range all {
				if w.Color == "blue" {
					expect = append(expect, w.ID)
				}
			}
		}
		if !slices.Equal(seen, expect) {
			t.Fatalf("pages (filters %v) = %v, want %v", filters, seen, expect)
		}
	}
}

// TableCheck describes a resource table for [CheckTable].
type TableCheck struct {
	Table string
	// NewRow returns a row of the table's model (a pointer embedding
	// collection.System, business columns filled) for tenant and id; n makes
	// its unique business columns distinct.
	NewRow func(tenant string, id uuid.UUID, n int) collection.Row
	// Indexes lists the column lists of indexes the table must have besides
	// the engine's: (tenant_id, created_at, id) for lists and (tenant_id,
	// status, created_at, id) for the status filter.
	Indexes [][]string
}

// CheckTable checks that a resource table, whether made by a migration or
// by AutoMigrate, has what the engine relies on: the (tenant_id, id)
// primary key (a second row with the key is refused, the same ID in another
// tenant is accepted) and the indexes of lists and filters.
func CheckTable(t *testing.T, db *store.DB, c TableCheck) {
	t.Helper()
	id := uuid.New()
	insert := func(tenant string, n int) error {
		row := c.NewRow(tenant, id, n)
		s := row.SystemColumns()
		now := time.Now().UTC().Truncate(time.Microsecond)
		s.TenantID, s.ID, s.Version, s.Status, s.CreateFingerprint, s.Fingerprint, s.CreatedAt, s.UpdatedAt =
			tenant, id, 1, "active", "v1:x", "v1:x", now, now
		return db.Gorm.Table(c.Table).Omit(clause.Associations).Create(row).Error
	}
	if err := insert("check_a", 1); err != nil {
		t.Fatalf("%s: insert: %v", c.Table, err)
	}
	if err := insert("check_a", 2); err == nil {
		t.Fatalf("%s: a second row with one (tenant_id, id) was accepted: no primary key", c.Table)
	}
	if err := insert("check_b", 3); err != nil {
		t.Fatalf("%s: the same id in another tenant was refused: the primary key is not (tenant_id, id): %v", c.Table, err)
	}
	have := indexes(t, db, c.Table)
	for _, want := range append([][]string{{"tenant_id", "created_at", "id"}, {"tenant_id", "status", "created_at", "id"}}, c.Indexes...) {
		found := false
		for _, cols := range have {
			if len(cols) >= len(want) && slices.Equal(cols[:len(want)], want) {
				found = true
			}
		}
		if !found {
			t.Fatalf("%s: no index on (%v); indexes: %v", c.Table, want, have)
		}
	}
}

// indexes returns the column lists of table's indexes.
func indexes(t *testing.T, db *store.DB, table string) [][]string {
	t.Helper()
	var rows []struct{ Idx, Col string }
	q := `SELECT il.name AS idx, ii.name AS col FROM pragma_index_list(?) AS il, pragma_index_info(il.name) AS ii ORDER BY il.name, ii.seqno`
	if db.Driver.Name() == "postgres" {
		q = `SELECT i.relname AS idx, a.attname AS col
			FROM pg_index x
			JOIN pg_class i ON i.oid = x.indexrelid
			JOIN pg_class c ON c.oid = x.indrelid
			JOIN pg_namespace n ON n.oid = c.relnamespace
			CROSS JOIN LATERAL unnest(x.indkey) WITH ORDINALITY AS k(attnum, ord)
			JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum = k.attnum
			WHERE c.relname = ? AND n.nspname = current_schema()
			ORDER BY i.relname, k.ord`
	}
	if db.Driver.Name() == "mysql" {
		q = `SELECT index_name AS idx, column_name AS col FROM information_schema.statistics
			WHERE table_schema = DATABASE() AND table_name = ? ORDER BY index_name, seq_in_index`
	}
	if err := db.Gorm.Raw(q, table).Scan(&rows).Error; err != nil {
		t.Fatalf("%s: read indexes: %v", table, err)
	}
	var out [][]string
	last := ""
	for _, r := range rows {
		if r.Idx != last {
			out = append(out, nil)
			last = r.Idx
		}
		out[len(out)-1] = append(out[len(out)-1], r.Col)
	}
	return out
}

func insertParts(t *testing.T, db *store.DB, rs collection.RowStore, id uuid.UUID, labels ...string) {
	t.Helper()
	ps := make([]Part, len(labels))
	for i, l := range labels {
		ps[i] = Part{TenantID: "t1", WidgetID: id, Position: i, Label: l}
	}
	if err := rs.InsertChildren(context.Background(), db.Gorm, collection.ChildRowsParams{ChildTable: parts, Tenant: "t1", ParentID: id, Rows: &ps}); err != nil {
		t.Fatalf("InsertChildren: %v", err)
	}
}

// clock reads the database clock by a Read that finds no row.
func clock(t *testing.T, db *store.DB, rs collection.RowStore) time.Time {
	t.Helper()
	var now time.Time
	if ok, err := rs.Read(context.Background(), db.Gorm, collection.ReadRowParams{Key: key("nobody", uuid.New()), Dest: &Widget{}, Now: &now}); ok || err != nil {
		t.Fatalf("Read of a missing row = %t, %v", ok, err)
	}
	return now
}

func key(tenant string, id uuid.UUID) collection.RowKey {
	return collection.RowKey{Table: "widgets", Tenant: tenant, ID: id}
}

func mustInsert(t *testing.T, db *store.DB, rs collection.RowStore, w *Widget) {
	t.Helper()
	if ok, err := rs.Insert(context.Background(), db.Gorm, collection.InsertRowParams{Table: "widgets", Row: w}); !ok || err != nil {
		t.Fatalf("Insert = %t, %v", ok, err)
	}
}

func read(t *testing.T, db *store.DB, rs collection.RowStore, tenant string, id uuid.UUID, withParts bool) Widget {
	t.Helper()
	var w Widget
	p := collection.ReadRowParams{Key: key(tenant, id), Dest: &w}
	if withParts {
		p.Preload = preload
	}
	ok, err := rs.Read(context.Background(), db.Gorm, p)
	if !ok || err != nil {
		t.Fatalf("Read = %t, %v", ok, err)
	}
	w.CreatedAt, w.UpdatedAt = w.CreatedAt.UTC(), w.UpdatedAt.UTC()
	return w
}
