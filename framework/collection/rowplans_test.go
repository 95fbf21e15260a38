package collection

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/pipeline"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

type planParent struct {
	System
	Name     string  `gorm:"not null"`
	Score    *int64  // NULL when nil
	Ratio    float64 `gorm:"column:ratio_x"`
	Raw      []byte
	Note     string    // a nullable column: NULL reads as ""
	Skipped  string    `gorm:"-"`
	ReadOnly string    `gorm:"->"`
	Kids     []planKid `gorm:"foreignKey:TenantID,ParentID;references:TenantID,ID"`
}

type planKid struct {
	TenantID string    `gorm:"primaryKey"`
	ParentID uuid.UUID `gorm:"primaryKey;type:uuid"`
	N        int       `gorm:"primaryKey;autoIncrement:false"`
	Tags     []string  `gorm:"serializer:json"`
}

// Models the plan leaves to gorm.
type (
	planDefault struct {
		ID   uuid.UUID `gorm:"primaryKey"`
		Kind string    `gorm:"default:'a'"`
	}
	planSerial struct {
		ID   int64 `gorm:"primaryKey"`
		Name string
	}
	planHooked struct {
		ID   uuid.UUID `gorm:"primaryKey"`
		Name string
	}
	planSlice struct {
		ID  uuid.UUID `gorm:"primaryKey"`
		Doc json.RawMessage
	}
	planAutoTime struct {
		ID        uuid.UUID `gorm:"primaryKey"`
		CreatedAt time.Time
	}
)

func (*planHooked) BeforeCreate(*gorm.DB) error { return nil }

// valued prints args as the driver gets them (a serializer's or any other
// driver.Valuer's value).
func valued(t *testing.T, args []any) string {
	t.Helper()
	out := make([]any, len(args))
	for i, a := range args {
		out[i] = a
		if v, ok := a.(driver.Valuer); ok {
			dv, err := v.Value()
			if err != nil {
				t.Fatal(err)
			}
			out[i] = dv
		}
	}
	return fmt.Sprintf("%#v", out)
}

// TestInsertPlanSpellsGormsInsert: the plan's INSERT of a model and of a
// slice of child rows is gorm's Create (associations omitted), text and
// arguments, and the models whose INSERT gorm varies (database defaults,
// auto-increment keys, hooks, slices it would expand, auto times left
// zero) are left to gorm.
func TestInsertPlanSpellsGormsInsert(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) { testInsertPlanSpellsGormsInsert(t, dsn) })
}

func testInsertPlanSpellsGormsInsert(t *testing.T, dsn string) {
	ctx := context.Background()
	db, err := store.Open(ctx, dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	dry := db.Gorm.Session(&gorm.Session{DryRun: true})
	score := int64(7)
	now := time.Now().UTC()
	parent := &planParent{System: System{TenantID: "acme", ID: uuid.New(), Version: 1, Status: "draft",
		CreateFingerprint: "fp", Fingerprint: "fp", CreatedAt: now, UpdatedAt: now},
		Name: "n", Score: &score, Ratio: 0.5, Raw: []byte("r"), Skipped: "s", ReadOnly: "ro"}
	kids := &[]planKid{{TenantID: "acme", ParentID: parent.ID, N: 1, Tags: []string{"a"}},
		{TenantID: "acme", ParentID: parent.ID, N: 2}}
	for _, tc := range []struct {
		table string
		rows  any
	}{{"plan_parents", parent}, {"plan_kids", kids}, {"plan_parents", &planParent{}}} {
		want := dry.Table(tc.table).Omit(clause.Associations).Create(tc.rows).Statement
		rv := reflect.ValueOf(tc.rows).Elem()
		model := rv.Type()
		if model.Kind() == reflect.Slice {
			model = model.Elem()
		}
		pl := insertPlanOf(db.Gorm, tc.table, model)
		if pl == nil {
			t.Fatalf("%s: no plan", model)
		}
		// In the dialect's own spelling, the statement sent where the
		// transaction does not pipeline, it is gorm's text; numbered, as
		// a pipeline queues it, it differs only in its placeholders.
		sql, args, ok := pl.statement(ctx, rv, false)
		if !ok || sql != want.SQL.String() {
			t.Fatalf("%s:\nplan %s\ngorm %s", model, sql, want.SQL.String())
		}
		numbered, _, _ := pl.statement(ctx, rv, true)
		if got := pipeline.NumberPlaceholders(want.SQL.String()); numbered != got {
			t.Fatalf("%s numbered:\nplan %s\nwant %s", model, numbered, got)
		}
		if valued(t, args) != valued(t, want.Vars) {
			t.Fatalf("%s arguments:\nplan %#v\ngorm %#v", model, args, want.Vars)
		}
	}
	for _, m := range []any{planDefault{}, planSerial{}, planHooked{}, planSlice{}} {
		if pl := insertPlanOf(db.Gorm, "t", reflect.TypeOf(m)); pl != nil {
			t.Errorf("%T has a plan: %s", m, pl.head)
		}
	}
	pl := insertPlanOf(db.Gorm, "t", reflect.TypeFor[planAutoTime]())
	if _, _, ok := pl.statement(ctx, reflect.ValueOf(&planAutoTime{ID: uuid.New()}).Elem(), true); ok {
		t.Error("a row with autoCreateTime left zero is planned; gorm fills it in")
	}
	if _, _, ok := pl.statement(ctx, reflect.ValueOf(&planAutoTime{ID: uuid.New(), CreatedAt: now}).Elem(), true); !ok {
		t.Error("a row with its autoCreateTime set is not planned")
	}
}

// openPlanDB opens a store on dsn for the test.
func openPlanDB(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestReadPlanReadsAsGormTakes: a row read by its plan is the row gorm's
// Take reads, field for field (a NULL into a string, a serializer, a
// column the model lacks, a tombstone with and without LiveOnly), on every
// dialect; a missing key is not found, and the database clock is read
// either way.
func TestReadPlanReadsAsGormTakes(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openPlanDB(t, dsn)
		g := db.Gorm
		if err := g.AutoMigrate(&planParent{}, &planKid{}); err != nil {
			t.Fatal(err)
		}
		if err := g.Exec("ALTER TABLE plan_parents ADD COLUMN extra TEXT").Error; err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		score := int64(3)
		row := planParent{System: System{TenantID: "acme", ID: uuid.New(), Version: 2, Status: "draft",
			CreateFingerprint: "c", Fingerprint: "f", CreatedAt: now, UpdatedAt: now}, Name: "n", Score: &score, Ratio: 1.5, Raw: []byte{0, 1}}
		tomb := row
		tomb.ID, tomb.DeletedAt, tomb.Score = uuid.New(), &now, nil
		for _, r := range []*planParent{&row, &tomb} {
			if err := g.Omit(clause.Associations).Create(r).Error; err != nil {
				t.Fatal(err)
			}
		}
		if err := g.Exec("UPDATE plan_parents SET note = NULL, extra = 'x'").Error; err != nil {
			t.Fatal(err)
		}
		plain := NewRowStore(db.Driver).(gormRowStore).compiles()
		pl := readPlanOf(g, "plan_parents", reflect.TypeFor[planParent](), db.Driver.Now(), plain)
		// Where the database compiles each statement (SQLite), the read
		// is a plain WHERE and a miss reads the clock apart; elsewhere one
		// outer join returns both.
		if joined := strings.Contains(pl.sql[0], " JOIN "); joined == plain || (pl.clock != "") != plain {
			t.Fatalf("plain %v: the plan reads %q, and the clock apart by %q", plain, pl.sql[0], pl.clock)
		}
		for _, tc := range []struct {
			id       uuid.UUID
			liveOnly bool
			found    bool
		}{{row.ID, false, true}, {row.ID, true, true}, {tomb.ID, false, true}, {tomb.ID, true, false}, {uuid.New(), false, false}} {
			var want, got planParent
			q := g.Table("plan_parents").Where("tenant_id = ? AND id = ?", "acme", tc.id)
			if tc.liveOnly {
				q = q.Where("deleted_at IS NULL")
			}
			err := q.Take(&want).Error
			if tc.found != (err == nil) {
				t.Fatalf("gorm's Take of %v (live only %v): %v", tc.id, tc.liveOnly, err)
			}
			// Through database/sql (no driver), and through the driver's
			// own row read where it has one (PostgreSQL: pgx).
			for _, drv := range []store.Driver{nil, db.Driver} {
				got = planParent{}
				found, clock, err := pl.read(ctx, g, drv, RowKey{Table: "plan_parents", Tenant: "acme", ID: tc.id}, tc.liveOnly, reflect.ValueOf(&got).Elem())
				if err != nil || found != tc.found || clock.IsZero() {
					t.Fatalf("plan read by %T of %v (live only %v): %v %v, database clock %v", drv, tc.id, tc.liveOnly, found, err, clock)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("plan read by %T %+v\ngorm's Take %+v", drv, got, want)
				}
			}
		}
	})
}

// TestPlansAreSharedByTransactions: every transaction of a store (each a
// gorm session with a configuration of its own) uses the one plan of a
// model and table, and the rows it queues are written.
func TestPlansAreSharedByTransactions(t *testing.T) {
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(t, "postgres"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	table := "shared_kids_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if err := db.Gorm.Exec("CREATE TABLE " + table + " (tenant_id TEXT, parent_id UUID, n INT, tags TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	plans := func() (n int) {
		insertPlans.Range(func(k, _ any) bool {
			if k.(planKey).table == table {
				n++
			}
			return true
		})
		return n
	}
	parent := uuid.New()
	for i := range 3 {
		err := db.Write(ctx, func(tx *gorm.DB) error {
			queued, err := laterInsert(ctx, tx, table, &[]planKid{{TenantID: "acme", ParentID: parent, N: i}}, nil)
			if !queued {
				t.Fatal("not queued by a plan")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	var rows int64
	if err := db.Gorm.Table(table).Where("parent_id = ?", parent).Count(&rows).Error; err != nil {
		t.Fatal(err)
	}
	if n := plans(); n != 1 || rows != 3 {
		t.Fatalf("%d plans, %d rows written; want 1 and 3", n, rows)
	}
}

// TestLaterCreateWritesTheModelsTable: LaterCreate writes rows into the
// model's own table with the transaction, on every dialect (by its plan,
// queued where the transaction pipelines, sent at once on SQLite), and
// nothing when the transaction rolls back.
func TestLaterCreateWritesTheModelsTable(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := openPlanDB(t, dsn)
		if err := db.Gorm.AutoMigrate(&planKid{}); err != nil {
			t.Fatal(err)
		}
		parent := uuid.New()
		kids := []planKid{{TenantID: "acme", ParentID: parent, N: 1, Tags: []string{"x"}}, {TenantID: "acme", ParentID: parent, N: 2}}
		if err := db.Write(ctx, func(tx *gorm.DB) error { return LaterCreate(ctx, tx, &kids, nil) }); err != nil {
			t.Fatal(err)
		}
		rollback := errors.New("roll back")
		if err := db.Write(ctx, func(tx *gorm.DB) error {
			if err := LaterCreate(ctx, tx, &planKid{TenantID: "acme", ParentID: parent, N: 3}, nil); err != nil {
				return err
			}
			return rollback
		}); !errors.Is(err, rollback) {
			t.Fatal(err)
		}
		var got []planKid
		if err := db.Gorm.Where("parent_id = ?", parent).Order("n").Find(&got).Error; err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(got) != fmt.Sprint(kids) {
			t.Fatalf("stored %+v, want %+v", got, kids)
		}
	})
}

// TestInsertPlanBounds: a plan keeps the statement text of small row
// counts only, and leaves to gorm the rows of a session that has gorm
// split inserts into batches (CreateBatchSize).
func TestInsertPlanBounds(t *testing.T) {
	ctx := context.Background()
	db := openPlanDB(t, testdb.New(t, "postgres"))
	pl := insertPlanOf(db.Gorm, "bounded_kids", reflect.TypeFor[planKid]())
	for _, n := range []int{2, maxCachedRows + 1} {
		rows := make([]planKid, n)
		if _, _, ok := pl.statement(ctx, reflect.ValueOf(&rows).Elem(), true); !ok {
			t.Fatalf("%d rows not planned", n)
		}
		if _, cached := pl.sql.Load(n); cached != (n <= maxCachedRows) {
			t.Fatalf("statement for %d rows cached: %v", n, cached)
		}
	}
	err := db.Write(ctx, func(tx *gorm.DB) error {
		batched := tx.Session(&gorm.Session{CreateBatchSize: 10})
		queued, err := laterInsert(ctx, batched, "bounded_kids", &[]planKid{{TenantID: "acme"}}, nil)
		if queued {
			t.Error("rows of a session with CreateBatchSize queued by a plan")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}
