package rowsql_test

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/internal/rowsql"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

type planParent struct {
	TenantID  string     `gorm:"column:tenant_id;primaryKey"`
	ID        uuid.UUID  `gorm:"column:id;primaryKey;type:uuid"`
	Version   int64      `gorm:"not null"`
	CreatedAt time.Time  `gorm:"not null;autoCreateTime:false"`
	UpdatedAt time.Time  `gorm:"not null;autoUpdateTime:false"`
	DeletedAt *time.Time `gorm:"column:deleted_at"`
	Name      string     `gorm:"not null"`
	Score     *int64     // NULL when nil
	Ratio     float64    `gorm:"column:ratio_x"`
	Raw       []byte
	Note      string    // a nullable column: NULL reads as ""
	Skipped   string    `gorm:"-"`
	ReadOnly  string    `gorm:"->"`
	Kids      []planKid `gorm:"foreignKey:TenantID,ParentID;references:TenantID,ID"`
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

// open opens a store on dsn for the test.
func open(t *testing.T, dsn string) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestInsertPlanSpellsGormsInsert: the plan's INSERT of a model and of a
// slice of child rows is gorm's Create (associations omitted), text and
// arguments, in the placeholders the driver declares, and the models
// whose INSERT gorm varies (database defaults, auto-increment keys,
// hooks, slices it would expand, auto times left zero) are left to gorm.
func TestInsertPlanSpellsGormsInsert(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := open(t, dsn)
		dry := db.Gorm.Session(&gorm.Session{DryRun: true})
		score := int64(7)
		now := time.Now().UTC()
		parent := &planParent{TenantID: "acme", ID: uuid.New(), Version: 1, CreatedAt: now, UpdatedAt: now,
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
			pl := rowsql.InsertPlanOf(db.Rows(), db.Gorm, tc.table, model)
			if pl == nil {
				t.Fatalf("%s: no plan", model)
			}
			sql, args, ok := pl.Statement(ctx, rv)
			if !ok || sql != want.SQL.String() {
				t.Fatalf("%s:\nplan %s\ngorm %s", model, sql, want.SQL.String())
			}
			if valued(t, args) != valued(t, want.Vars) {
				t.Fatalf("%s arguments:\nplan %#v\ngorm %#v", model, args, want.Vars)
			}
		}
		for _, m := range []any{planDefault{}, planSerial{}, planHooked{}, planSlice{}} {
			if pl := rowsql.InsertPlanOf(db.Rows(), db.Gorm, "t", reflect.TypeOf(m)); pl != nil {
				t.Errorf("%T has a plan: %s", m, pl.Head())
			}
		}
		pl := rowsql.InsertPlanOf(db.Rows(), db.Gorm, "t", reflect.TypeFor[planAutoTime]())
		if _, _, ok := pl.Statement(ctx, reflect.ValueOf(&planAutoTime{ID: uuid.New()}).Elem()); ok {
			t.Error("a row with autoCreateTime left zero is planned; gorm fills it in")
		}
		if _, _, ok := pl.Statement(ctx, reflect.ValueOf(&planAutoTime{ID: uuid.New(), CreatedAt: now}).Elem()); !ok {
			t.Error("a row with its autoCreateTime set is not planned")
		}
	})
}

// TestReadPlanReadsAsGormTakes: a row read by its plan is the row gorm's
// Take reads, field for field (a NULL into a string, a serializer, a
// column the model lacks, a tombstone with and without LiveOnly), on every
// database; a missing key is not found, and the database clock is read
// either way.
func TestReadPlanReadsAsGormTakes(t *testing.T) {
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db := open(t, dsn)
		g := db.Gorm
		if err := g.AutoMigrate(&planParent{}, &planKid{}); err != nil {
			t.Fatal(err)
		}
		if err := g.Exec("ALTER TABLE plan_parents ADD COLUMN extra TEXT").Error; err != nil {
			t.Fatal(err)
		}
		now := time.Now().UTC().Truncate(time.Microsecond)
		score := int64(3)
		row := planParent{TenantID: "acme", ID: uuid.New(), Version: 2, CreatedAt: now, UpdatedAt: now,
			Name: "n", Score: &score, Ratio: 1.5, Raw: []byte{0, 1}}
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
		pl := rowsql.ReadPlanOf(db.Rows(), g, "plan_parents", reflect.TypeFor[planParent]())
		// Where the database compiles each statement (SQLite), the read
		// is a plain WHERE and a miss reads the clock apart; elsewhere one
		// outer join returns both.
		sql, clock := pl.SQL()
		if joined := strings.Contains(sql, " JOIN "); joined == (clock != "") {
			t.Fatalf("the plan reads %q, and the clock apart by %q", sql, clock)
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
			// Through database/sql, and through the driver's own row read
			// where it has one (PostgreSQL: pgx).
			for _, plain := range []bool{true, false} {
				got = planParent{}
				found, err := pl.Read(ctx, g, db.Rows(), plain, store.RowKey{Table: "plan_parents", Tenant: "acme", ID: tc.id}, tc.liveOnly, reflect.ValueOf(&got).Elem())
				if err != nil || found != tc.found {
					t.Fatalf("plan read (plain %v) of %v (live only %v): %v %v", plain, tc.id, tc.liveOnly, found, err)
				}
				if !reflect.DeepEqual(got, want) {
					t.Fatalf("plan read (plain %v) %+v\ngorm's Take %+v", plain, got, want)
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
	db := open(t, testdb.New(t, "postgres"))
	table := "shared_kids_" + strings.ReplaceAll(uuid.NewString(), "-", "")
	if err := db.Gorm.Exec("CREATE TABLE " + table + " (tenant_id TEXT, parent_id UUID, n INT, tags TEXT)").Error; err != nil {
		t.Fatal(err)
	}
	parent := uuid.New()
	for i := range 3 {
		err := db.Write(ctx, func(tx *gorm.DB) error {
			queued, err := rowsql.LaterInsert(ctx, db.Rows(), tx, table, &[]planKid{{TenantID: "acme", ParentID: parent, N: i}})
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
	if n := rowsql.InsertPlans(db.Rows(), table); n != 1 || rows != 3 {
		t.Fatalf("%d plans, %d rows written; want 1 and 3", n, rows)
	}
}

// TestInsertPlanBounds: a plan keeps the statement text of small row
// counts only, and leaves to gorm the rows of a session that has gorm
// split inserts into batches (CreateBatchSize), and every row of a store
// whose plans are off.
func TestInsertPlanBounds(t *testing.T) {
	ctx := context.Background()
	dsn := testdb.New(t, "postgres")
	db := open(t, dsn)
	pl := rowsql.InsertPlanOf(db.Rows(), db.Gorm, "bounded_kids", reflect.TypeFor[planKid]())
	for _, n := range []int{2, rowsql.MaxCachedRows + 1} {
		rows := make([]planKid, n)
		if _, _, ok := pl.Statement(ctx, reflect.ValueOf(&rows).Elem()); !ok {
			t.Fatalf("%d rows not planned", n)
		}
		if cached := pl.Cached(n); cached != (n <= rowsql.MaxCachedRows) {
			t.Fatalf("statement for %d rows cached: %v", n, cached)
		}
	}
	off, err := store.Open(ctx, dsn, store.Config{DisableRowPlans: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = off.Close() })
	for _, s := range []*store.DB{db, off} {
		err := s.Write(ctx, func(tx *gorm.DB) error {
			batched := tx
			if s == db {
				batched = tx.Session(&gorm.Session{CreateBatchSize: 10})
			}
			queued, err := rowsql.LaterInsert(ctx, s.Rows(), batched, "bounded_kids", &[]planKid{{TenantID: "acme"}})
			if queued {
				t.Error("rows queued by a plan")
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}
