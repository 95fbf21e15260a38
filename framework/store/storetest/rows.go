package storetest

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"
	"gorm.io/gorm/schema"

	"github.com/retrysafe/retrysafe/framework/store"
)

// widget is the rows contract's resource model: the columns the
// statements of [store.Rows] rely on, as a resource of the PUT pattern
// has them (collection.System), a unique name per tenant, and child rows.
// Its times keep microseconds on the application's own handle too (where
// the MySQL family's AutoMigrate makes DATETIME(3) otherwise), so that the
// suite compares them whole.
type widget struct {
	TenantID          string     `gorm:"column:tenant_id;primaryKey;not null;index:,composite:list,priority:1"`
	ID                uuid.UUID  `gorm:"column:id;primaryKey;type:uuid;not null;index:,composite:list,priority:3"`
	Version           int64      `gorm:"column:version;not null"`
	Status            string     `gorm:"column:status;not null"`
	CreateFingerprint string     `gorm:"column:create_fingerprint;not null"`
	Fingerprint       string     `gorm:"column:fingerprint;not null"`
	CreatedAt         time.Time  `gorm:"column:created_at;not null;autoCreateTime:false;precision:6;index:,composite:list,priority:2"`
	UpdatedAt         time.Time  `gorm:"column:updated_at;not null;autoUpdateTime:false;precision:6"`
	DeletedAt         *time.Time `gorm:"column:deleted_at;precision:6"`
	Name              string     `gorm:"not null;uniqueIndex:idx_widgets_name,expression:tenant_id,priority:1;uniqueIndex:idx_widgets_name,priority:2"`
	Color             string     `gorm:"not null;index:idx_widgets_color,expression:tenant_id,priority:1;index:idx_widgets_color,priority:2"`
	Parts             []part     `gorm:"foreignKey:TenantID,WidgetID;references:TenantID,ID"`
}

// part is a child row of a [widget].
type part struct {
	TenantID string    `gorm:"primaryKey"`
	WidgetID uuid.UUID `gorm:"primaryKey;type:uuid"`
	Position int       `gorm:"primaryKey;autoIncrement:false"`
	Label    string    `gorm:"not null"`
}

var (
	parts   = store.RowChildTable{Table: "parts", ParentColumn: "widget_id"}
	preload = []store.RowPreload{{Field: "Parts", OrderBy: "position"}}
	columns = []string{"version", "status", "fingerprint", "updated_at", "name", "color"}
)

func newWidget(tenant string, id uuid.UUID, name string, at time.Time) *widget {
	return &widget{TenantID: tenant, ID: id, Version: 1, Status: "active",
		CreateFingerprint: "v1:create", Fingerprint: "v1:create", CreatedAt: at, UpdatedAt: at, Name: name, Color: "red"}
}

// testRows runs the resource rows' contract on the driver's statements
// ([store.DB.Rows]), through store.Open and on the application's own
// handle (store.New), and with the plans off (store.Config.DisableRowPlans):
// idempotent inserts, versioned updates, tombstones, child rows, snapshot
// reads and lists, each case as a parallel subtest on a database of its
// own.
func testRows(t *testing.T, h Harness) {
	for _, tc := range []struct {
		name string
		open func(t *testing.T) *store.DB
	}{
		{"Open", func(t *testing.T) *store.DB { return open(t, h, store.Config{}) }},
		{"OwnGormDB", func(t *testing.T) *store.DB {
			db, err := store.New(context.Background(), h.Gorm(t), store.Config{})
			if err != nil {
				t.Fatal(err)
			}
			return db
		}},
		{"NoPlans", func(t *testing.T) *store.DB { return open(t, h, store.Config{DisableRowPlans: true}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := rowsSuite{open: tc.open, ctx: context.Background(), now: time.Now().UTC().Truncate(time.Microsecond)}
			for _, c := range []struct {
				name string
				run  func(*testing.T)
			}{
				{"InsertOnConflict", s.testInsertOnConflict},
				{"CreateOfANewKey", s.testCreateOfANewKey},
				{"CreateIntoTheModelsTable", s.testCreateIntoTheModelsTable},
				{"ConcurrentInsertsOfOneKey", s.testConcurrentInsertsOfOneKey},
				{"ReadTheDatabaseClock", s.testReadTheDatabaseClock},
				{"ReadAndLockedRead", s.testReadAndLockedRead},
				{"FencedUpdate", s.testFencedUpdate},
				{"ChildRows", s.testChildRows},
				{"ChildRowsOfTheVersionRead", s.testChildRowsOfTheVersionRead},
				{"ChildRowErrorStopsTheCommit", s.testChildRowErrorStopsTheCommit},
				{"TombstoneAndPurge", s.testTombstoneAndPurge},
				{"ListPaging", s.testListPaging},
				{"TableCheck", s.testTableCheck},
			} {
				t.Run(c.name, c.run)
			}
		})
	}
}

// rowsSuite is one run of the rows contract: where its databases come
// from, and the time its rows are written at.
type rowsSuite struct {
	open func(t *testing.T) *store.DB
	ctx  context.Context
	now  time.Time
}

// setup opens a fresh database with the contract's tables.
func (s rowsSuite) setup(t *testing.T) (*store.DB, store.Rows) {
	t.Helper()
	db := s.open(t)
	if err := db.Gorm.AutoMigrate(&widget{}, &part{}); err != nil {
		t.Fatalf("AutoMigrate: %v", err)
	}
	return db, db.Rows()
}

func (s rowsSuite) testInsertOnConflict(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	insert := func(w *widget) bool {
		t.Helper()
		ok, err := rs.Insert(ctx, db.Gorm, store.RowInsertParams{Table: "widgets", Row: w})
		if err != nil {
			t.Fatalf("Insert: %v", err)
		}
		return ok
	}
	if !insert(newWidget("t1", id, "a", now)) {
		t.Fatal("first insert did not insert")
	}
	if insert(newWidget("t1", id, "b", now.Add(time.Second))) {
		t.Fatal("second insert of the key inserted")
	}
	if !insert(newWidget("t2", id, "a", now)) {
		t.Fatal("the same ID in another tenant did not insert")
	}
	got := read(t, db, rs, "t1", id, false)
	if got.Name != "a" || !got.CreatedAt.Equal(now) {
		t.Fatalf("the conflicting insert changed the row: %+v", got)
	}
	_, err := rs.Insert(ctx, db.Gorm, store.RowInsertParams{Table: "widgets", Row: newWidget("t1", uuid.New(), "a", now)})
	if !errors.Is(err, store.ErrUniqueViolation) {
		t.Fatalf("a duplicate unique name = %v, want ErrUniqueViolation", err)
	}
	// A text the database cannot store (PostgreSQL: NUL) is refused as
	// ErrUnstorableText, or stored.
	_, err = rs.Insert(ctx, db.Gorm, store.RowInsertParams{Table: "widgets", Row: newWidget("t1", uuid.New(), "nul\x00name", now)})
	if err != nil && !errors.Is(err, store.ErrUnstorableText) {
		t.Fatalf("a NUL in a text = %v, want nil or ErrUnstorableText", err)
	}
}

func (s rowsSuite) testCreateOfANewKey(t *testing.T) {
	ctx, now := s.ctx, s.now
	// Create is a plain INSERT that may travel with the commit: a new
	// key commits; a key that exists fails the transaction with
	// ErrUniqueViolation (from Create or from Write) and nothing of
	// the transaction commits, the existing row unchanged.
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		return rs.Create(ctx, tx, store.RowInsertParams{Table: "widgets", Row: newWidget("t1", id, "a", now)})
	}); err != nil {
		t.Fatalf("Create of a new key: %v", err)
	}
	if got := read(t, db, rs, "t1", id, false); got.Name != "a" || got.Version != 1 {
		t.Fatalf("created row: %+v", got)
	}
	other := uuid.New()
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if _, err := rs.Insert(ctx, tx, store.RowInsertParams{Table: "widgets", Row: newWidget("t1", other, "o", now)}); err != nil {
			return err
		}
		return rs.Create(ctx, tx, store.RowInsertParams{Table: "widgets", Row: newWidget("t1", id, "b", now)})
	})
	if !errors.Is(err, store.ErrUniqueViolation) {
		t.Fatalf("Create of an existing key = %v, want ErrUniqueViolation", err)
	}
	if got := read(t, db, rs, "t1", id, false); got.Name != "a" {
		t.Fatalf("Create of an existing key changed it: %+v", got)
	}
	var w widget
	if ok, err := rs.Read(ctx, db.Gorm, store.RowReadParams{Key: key("t1", other), Dest: &w}); ok || err != nil {
		t.Fatalf("the transaction of a failed Create committed: %t, %v", ok, err)
	}
}

func (s rowsSuite) testCreateIntoTheModelsTable(t *testing.T) {
	// Create writes a model, or a slice of them, into the model's own
	// table when no table is named, with the transaction, and nothing
	// when the transaction rolls back.
	ctx := s.ctx
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", s.now))
	ps := []part{{TenantID: "t1", WidgetID: id, Position: 1, Label: "x"}, {TenantID: "t1", WidgetID: id, Position: 2, Label: "y"}}
	if err := db.Write(ctx, func(tx *gorm.DB) error { return rs.Create(ctx, tx, store.RowInsertParams{Row: &ps}) }); err != nil {
		t.Fatal(err)
	}
	rollback := errors.New("roll back")
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := rs.Create(ctx, tx, store.RowInsertParams{Row: &part{TenantID: "t1", WidgetID: id, Position: 3, Label: "z"}}); err != nil {
			return err
		}
		return rollback
	}); !errors.Is(err, rollback) {
		t.Fatal(err)
	}
	var got []part
	if err := db.Gorm.Where("widget_id = ?", id).Order("position").Find(&got).Error; err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(got) != fmt.Sprint(ps) {
		t.Fatalf("stored %+v, want %+v", got, ps)
	}
}

func (s rowsSuite) testConcurrentInsertsOfOneKey(t *testing.T) {
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
				inserted[i], err = rs.Insert(ctx, tx, store.RowInsertParams{Table: "widgets", Row: newWidget("t1", id, fmt.Sprint("w", i), now)})
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

func (s rowsSuite) testReadTheDatabaseClock(t *testing.T) {
	ctx, now := s.ctx, s.now
	// Every kind of read reports the database clock when asked, found
	// or not, in UTC and in order.
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
	insertParts(t, db, rs, id, "x")
	var last time.Time
	check := func(name string, p store.RowReadParams, tx *gorm.DB, wantFound bool) {
		t.Helper()
		var at time.Time
		p.Dest, p.Now = &widget{}, &at
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
	check("a miss", store.RowReadParams{Key: key("t1", uuid.New())}, db.Gorm, false)
	check("another tenant's row", store.RowReadParams{Key: key("t2", id)}, db.Gorm, false)
	check("a row", store.RowReadParams{Key: key("t1", id)}, db.Gorm, true)
	check("a row with its child rows", store.RowReadParams{Key: key("t1", id), Preload: preload}, db.Gorm, true)
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		check("a miss in a transaction", store.RowReadParams{Key: key("t1", uuid.New())}, tx, false)
		check("a row in a transaction", store.RowReadParams{Key: key("t1", id), LiveOnly: true}, tx, true)
		check("a locked read", store.RowReadParams{Key: key("t1", id), ForUpdate: true, Preload: preload}, tx, true)
		check("a locked miss", store.RowReadParams{Key: key("t1", uuid.New()), ForUpdate: true}, tx, false)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}

func (s rowsSuite) testReadAndLockedRead(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
	var w widget
	if ok, err := rs.Read(ctx, db.Gorm, store.RowReadParams{Key: key("t2", id), Dest: &w}); ok || err != nil {
		t.Fatalf("Read of another tenant's row = %t, %v", ok, err)
	}
	// A locked read holds the row: a concurrent fenced update waits
	// for it and then finds the version moved on.
	locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		done <- db.Write(ctx, func(tx *gorm.DB) error {
			var cur widget
			if ok, err := rs.Read(ctx, tx, store.RowReadParams{Key: key("t1", id), Dest: &cur, ForUpdate: true}); !ok || err != nil {
				return fmt.Errorf("locked read = %t, %w", ok, err)
			}
			close(locked)
			<-release
			cur.Version, cur.Name = 2, "by-lock-holder"
			ok, err := rs.Update(ctx, tx, store.RowUpdateParams{Key: key("t1", id), Version: 1, Row: &cur, Columns: columns})
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
			next := newWidget("t1", id, "by-waiter", now)
			next.Version = 2
			ok, err := rs.Update(ctx, tx, store.RowUpdateParams{Key: key("t1", id), Version: 1, Row: next, Columns: columns})
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

func (s rowsSuite) testFencedUpdate(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
	next := newWidget("t1", id, "b", now)
	next.Version, next.Fingerprint, next.UpdatedAt = 2, "v1:next", now.Add(time.Minute)
	if ok, err := rs.Update(ctx, db.Gorm, store.RowUpdateParams{Key: key("t1", id), Version: 1, Row: next, Columns: columns}); !ok || err != nil {
		t.Fatalf("Update = %t, %v", ok, err)
	}
	stale := newWidget("t1", id, "c", now)
	if ok, err := rs.Update(ctx, db.Gorm, store.RowUpdateParams{Key: key("t1", id), Version: 1, Row: stale, Columns: columns}); ok || err != nil {
		t.Fatalf("stale Update = %t, %v", ok, err)
	}
	got := read(t, db, rs, "t1", id, false)
	if got.Name != "b" || got.Version != 2 || got.Fingerprint != "v1:next" || got.CreateFingerprint != "v1:create" || !got.CreatedAt.Equal(now) || !got.UpdatedAt.Equal(now.Add(time.Minute)) {
		t.Fatalf("row after updates: %+v", got)
	}
	other := newWidget("t1", uuid.New(), "z", now)
	mustInsert(t, db, rs, other)
	other.Name, other.Version = "b", 2
	if _, err := rs.Update(ctx, db.Gorm, store.RowUpdateParams{Key: key("t1", other.ID), Version: 1, Row: other, Columns: columns}); !errors.Is(err, store.ErrUniqueViolation) {
		t.Fatalf("Update to a taken unique name = %v, want ErrUniqueViolation", err)
	}
}

func (s rowsSuite) testChildRows(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
	insertParts(t, db, rs, id, "x", "y", "z")
	if got := read(t, db, rs, "t1", id, true); len(got.Parts) != 3 || got.Parts[0].Label != "x" || got.Parts[2].Label != "z" {
		t.Fatalf("preloaded parts: %+v", got.Parts)
	}
	if err := rs.DeleteChildren(ctx, db.Gorm, store.RowChildrenParams{RowChildTable: parts, Tenant: "t1", ParentID: id}); err != nil {
		t.Fatal(err)
	}
	if got := read(t, db, rs, "t1", id, true); len(got.Parts) != 0 {
		t.Fatalf("parts after DeleteChildren: %+v", got.Parts)
	}
}

func (s rowsSuite) testChildRowsOfTheVersionRead(t *testing.T) {
	ctx, now := s.ctx, s.now
	// Replaces rewrite the row and its child rows in one transaction
	// while readers read both: every read must pair a version with that
	// version's child rows (version v has v parts labelled "v").
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
	insertParts(t, db, rs, id, "1")
	const versions = 30
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		defer close(done)
		for v := int64(2); v <= versions; v++ {
			next := newWidget("t1", id, "a", now)
			next.Version = v
			label := fmt.Sprint(v)
			rows := make([]part, v)
			for i := range rows {
				rows[i] = part{TenantID: "t1", WidgetID: id, Position: i, Label: label}
			}
			err := db.Write(ctx, func(tx *gorm.DB) error {
				if ok, err := rs.Update(ctx, tx, store.RowUpdateParams{Key: key("t1", id), Version: v - 1, Row: next, Columns: columns}); !ok || err != nil {
					return fmt.Errorf("update to %d = %t, %w", v, ok, err)
				}
				if err := rs.DeleteChildren(ctx, tx, store.RowChildrenParams{RowChildTable: parts, Tenant: "t1", ParentID: id}); err != nil {
					return err
				}
				return rs.InsertChildren(ctx, tx, store.RowChildrenParams{RowChildTable: parts, Tenant: "t1", ParentID: id, Rows: &rows})
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
		var got widget
		ok, err := rs.Read(ctx, db.Gorm, store.RowReadParams{Key: key("t1", id), Dest: &got, Preload: preload})
		if reads%2 == 1 {
			// Every other read is a list page of the one row.
			var page []widget
			err = rs.List(ctx, db.Gorm, store.RowListParams{Table: "widgets", Tenant: "t1", Limit: 10, Dest: &page, Preload: preload})
			if ok = len(page) == 1; ok {
				got = page[0]
			}
		}
		if errors.Is(err, store.ErrChangedWhileRead) {
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

func (s rowsSuite) testChildRowErrorStopsTheCommit(t *testing.T) {
	ctx, now := s.ctx, s.now
	// InsertChildren may send its statement with the commit: a
	// violation must still reach the caller (from InsertChildren or
	// from Write), wrapped, and nothing of the transaction commits.
	t.Parallel()
	db, rs := s.setup(t)
	id := uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
	other := uuid.New()
	dup := []part{{TenantID: "t1", WidgetID: id, Position: 0, Label: "x"}, {TenantID: "t1", WidgetID: id, Position: 0, Label: "y"}}
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if _, err := rs.Insert(ctx, tx, store.RowInsertParams{Table: "widgets", Row: newWidget("t1", other, "b", now)}); err != nil {
			return err
		}
		return rs.InsertChildren(ctx, tx, store.RowChildrenParams{RowChildTable: parts, Tenant: "t1", ParentID: id, Rows: &dup})
	})
	if !errors.Is(err, store.ErrUniqueViolation) {
		t.Fatalf("Write with duplicate child rows = %v, want ErrUniqueViolation", err)
	}
	var w widget
	if ok, err := rs.Read(ctx, db.Gorm, store.RowReadParams{Key: key("t1", other), Dest: &w}); ok || err != nil {
		t.Fatalf("the row inserted with failing child rows was committed: %t, %v", ok, err)
	}
	if got := read(t, db, rs, "t1", id, true); len(got.Parts) != 0 {
		t.Fatalf("parts committed: %+v", got.Parts)
	}
}

func (s rowsSuite) testTombstoneAndPurge(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	id, live := uuid.New(), uuid.New()
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
	mustInsert(t, db, rs, newWidget("t1", live, "b", now))
	insertParts(t, db, rs, id, "x", "y")
	insertParts(t, db, rs, live, "x")
	if ok, err := rs.Tombstone(ctx, db.Gorm, store.RowTombstoneParams{Key: key("t1", id), Version: 7}); ok || err != nil {
		t.Fatalf("Tombstone fenced on a stale version = %t, %v", ok, err)
	}
	before := clock(t, db, rs)
	if ok, err := rs.Tombstone(ctx, db.Gorm, store.RowTombstoneParams{Key: key("t1", id), Version: 1}); !ok || err != nil {
		t.Fatalf("Tombstone = %t, %v", ok, err)
	}
	after := clock(t, db, rs)
	if ok, err := rs.Tombstone(ctx, db.Gorm, store.RowTombstoneParams{Key: key("t1", id)}); ok || err != nil {
		t.Fatalf("second Tombstone = %t, %v", ok, err)
	}
	// Stamped with the database clock of the statement.
	got := read(t, db, rs, "t1", id, false)
	if got.DeletedAt == nil || got.DeletedAt.Before(before) || got.DeletedAt.After(after) || got.Version != 2 || !got.UpdatedAt.Equal(*got.DeletedAt) {
		t.Fatalf("tombstone: %+v, want deleted_at = updated_at in [%v, %v]", got, before, after)
	}
	at := *got.DeletedAt
	var w widget
	if ok, err := rs.Read(ctx, db.Gorm, store.RowReadParams{Key: key("t1", id), Dest: &w, LiveOnly: true}); ok || err != nil {
		t.Fatalf("LiveOnly read of a tombstone = %t, %v", ok, err)
	}
	// A live row is never purged, nor are its child rows.
	if ok, err := rs.PurgeTombstone(ctx, db.Gorm, store.RowPurgeParams{Key: key("t1", live), Children: []store.RowChildTable{parts},
		DeletedBefore: at.Add(time.Hour)}); ok || err != nil {
		t.Fatalf("PurgeTombstone of a live row = %t, %v", ok, err)
	}
	if got := read(t, db, rs, "t1", live, true); len(got.Parts) != 1 {
		t.Fatalf("purge of a live row touched it: %+v", got)
	}
	// A tombstone newer than the cutoff (one written after the purge was
	// decided) is kept, with its child rows.
	if ok, err := rs.PurgeTombstone(ctx, db.Gorm, store.RowPurgeParams{Key: key("t1", id), Children: []store.RowChildTable{parts},
		DeletedBefore: at.Add(-time.Millisecond)}); ok || err != nil {
		t.Fatalf("PurgeTombstone of a tombstone newer than the cutoff = %t, %v", ok, err)
	}
	if got := read(t, db, rs, "t1", id, false); got.DeletedAt == nil {
		t.Fatalf("a tombstone newer than the cutoff was purged")
	}
	err := db.Write(ctx, func(tx *gorm.DB) error {
		ok, err := rs.PurgeTombstone(ctx, tx, store.RowPurgeParams{Key: key("t1", id), Children: []store.RowChildTable{parts},
			DeletedBefore: at.Add(time.Millisecond)})
		if err == nil && !ok {
			err = errors.New("PurgeTombstone of a tombstone purged nothing")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := rs.Read(ctx, db.Gorm, store.RowReadParams{Key: key("t1", id), Dest: &widget{}}); ok || err != nil {
		t.Fatalf("purged row still read: %t, %v", ok, err)
	}
	var n int64
	if err := db.Gorm.Table("parts").Where("widget_id = ?", id).Count(&n).Error; err != nil || n != 0 {
		t.Fatalf("purged row left %d parts (%v)", n, err)
	}
	// The ID is free again.
	mustInsert(t, db, rs, newWidget("t1", id, "a", now))
}

func (s rowsSuite) testListPaging(t *testing.T) {
	ctx, now := s.ctx, s.now
	t.Parallel()
	db, rs := s.setup(t)
	var want []uuid.UUID // newest first
	for i := range 23 {
		// Groups of three share a created_at: ties are broken by id.
		w := newWidget("t1", uuid.New(), fmt.Sprint("w", i), now.Add(time.Duration(i/3)*time.Millisecond))
		if i%2 == 0 {
			w.Color = "blue"
		}
		mustInsert(t, db, rs, w)
		insertParts(t, db, rs, w.ID, "p")
	}
	mustInsert(t, db, rs, newWidget("t2", uuid.New(), "other tenant", now))
	tomb := newWidget("t1", uuid.New(), "deleted", now)
	mustInsert(t, db, rs, tomb)
	if ok, err := rs.Tombstone(ctx, db.Gorm, store.RowTombstoneParams{Key: key("t1", tomb.ID)}); !ok || err != nil {
		t.Fatal(ok, err)
	}
	var all []widget
	if err := rs.List(ctx, db.Gorm, store.RowListParams{Table: "widgets", Tenant: "t1", Limit: 100, Dest: &all}); err != nil {
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
		a, b := all[i-1], all[i]
		if a.CreatedAt.Before(b.CreatedAt) || a.CreatedAt.Equal(b.CreatedAt) && notDescending(a.ID, b.ID) {
			t.Fatalf("not newest first at %d: %v %v / %v %v", i, a.CreatedAt, a.ID, b.CreatedAt, b.ID)
		}
		want = append(want, a.ID)
	}
	want = append(want, all[len(all)-1].ID)

	for _, filters := range [][]store.RowFilter{nil, {{Column: "color", Value: "blue"}}} {
		var seen []uuid.UUID
		var after *store.RowPosition
		for pages := 0; ; pages++ {
			if pages > 30 {
				t.Fatal("paging does not end")
			}
			var page []widget
			if err := rs.List(ctx, db.Gorm, store.RowListParams{Table: "widgets", Tenant: "t1", Filters: filters,
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
			last := page[len(page)-1]
			after = &store.RowPosition{CreatedAt: last.CreatedAt, ID: last.ID}
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

func insertParts(t *testing.T, db *store.DB, rs store.Rows, id uuid.UUID, labels ...string) {
	t.Helper()
	ps := make([]part, len(labels))
	for i, l := range labels {
		ps[i] = part{TenantID: "t1", WidgetID: id, Position: i, Label: l}
	}
	if err := rs.InsertChildren(context.Background(), db.Gorm, store.RowChildrenParams{RowChildTable: parts, Tenant: "t1", ParentID: id, Rows: &ps}); err != nil {
		t.Fatalf("InsertChildren: %v", err)
	}
}

// clock reads the database clock by a Read that finds no row.
func clock(t *testing.T, db *store.DB, rs store.Rows) time.Time {
	t.Helper()
	var now time.Time
	if ok, err := rs.Read(context.Background(), db.Gorm, store.RowReadParams{Key: key("nobody", uuid.New()), Dest: &widget{}, Now: &now}); ok || err != nil {
		t.Fatalf("Read of a missing row = %t, %v", ok, err)
	}
	return now
}

func key(tenant string, id uuid.UUID) store.RowKey {
	return store.RowKey{Table: "widgets", Tenant: tenant, ID: id}
}

func mustInsert(t *testing.T, db *store.DB, rs store.Rows, w *widget) {
	t.Helper()
	if ok, err := rs.Insert(context.Background(), db.Gorm, store.RowInsertParams{Table: "widgets", Row: w}); !ok || err != nil {
		t.Fatalf("Insert = %t, %v", ok, err)
	}
}

func read(t *testing.T, db *store.DB, rs store.Rows, tenant string, id uuid.UUID, withParts bool) widget {
	t.Helper()
	var w widget
	p := store.RowReadParams{Key: key(tenant, id), Dest: &w}
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

func (s rowsSuite) testTableCheck(t *testing.T) {
	t.Parallel()
	db, _ := s.setup(t)
	CheckTable(t, db, TableCheck{Table: "widgets",
		NewRow:  func(n int) any { return &widget{Name: fmt.Sprint("w", n), Color: "red"} },
		Indexes: [][]string{{"tenant_id", "name"}, {"tenant_id", "color"}}})
}

// TableCheck describes a resource table for [CheckTable].
type TableCheck struct {
	Table string
	// NewRow returns a row of the table's model (a pointer to a struct)
	// with its business columns filled in; n makes its unique business
	// columns distinct. CheckTable sets its key, version, status,
	// fingerprints and times, those of the columns it has.
	NewRow func(n int) any
	// Indexes lists the column lists of indexes the table must have besides
	// the one lists read by, (tenant_id, created_at, id): a filter's, a
	// unique business column's.
	Indexes [][]string
}

// CheckTable checks that a resource table, whether made by a migration or
// by AutoMigrate, has what the statements on resource rows rely on: the
// (tenant_id, id) primary key (a second row with the key is refused, the
// same ID in another tenant is accepted), the index of lists
// (tenant_id, created_at, id) and c.Indexes, each as a prefix of an index
// ([store.Rows.Indexes]). It writes rows of the tenants check_a and
// check_b.
func CheckTable(t *testing.T, db *store.DB, c TableCheck) {
	t.Helper()
	ctx := context.Background()
	id := uuid.New()
	insert := func(tenant string, n int) error {
		row := c.NewRow(n)
		s, err := schema.Parse(row, &sync.Map{}, db.Gorm.NamingStrategy)
		if err != nil {
			t.Fatalf("%s: the model %T: %v", c.Table, row, err)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		rv := reflect.ValueOf(row).Elem()
		for column, v := range map[string]any{"tenant_id": tenant, "id": id, "version": int64(1), "status": "active",
			"create_fingerprint": "v1:x", "fingerprint": "v1:x", "created_at": now, "updated_at": now} {
			if f := s.LookUpField(column); f != nil {
				if err := f.Set(ctx, rv, v); err != nil {
					t.Fatalf("%s: set %s: %v", c.Table, column, err)
				}
			}
		}
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
	have, err := db.Rows().Indexes(ctx, db.Gorm, c.Table)
	if err != nil {
		t.Fatalf("%s: read indexes: %v", c.Table, err)
	}
	for _, want := range append([][]string{{"tenant_id", "created_at", "id"}}, c.Indexes...) {
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
