package framework

import (
	"context"
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	"gorm.io/gorm/clause"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

type planParent struct {
	System
	Name     string  `gorm:"not null"`
	Score    *int64  // NULL when nil
	Ratio    float64 `gorm:"column:ratio_x"`
	Raw      []byte
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
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.Postgres(t), store.Config{})
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
		sql, args, ok := pl.statement(ctx, rv)
		if !ok || sql != want.SQL.String() {
			t.Fatalf("%s:\nplan %s\ngorm %s", model, sql, want.SQL.String())
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
	if _, _, ok := pl.statement(ctx, reflect.ValueOf(&planAutoTime{ID: uuid.New()}).Elem()); ok {
		t.Error("a row with autoCreateTime left zero is planned; gorm fills it in")
	}
	if _, _, ok := pl.statement(ctx, reflect.ValueOf(&planAutoTime{ID: uuid.New(), CreatedAt: now}).Elem()); !ok {
		t.Error("a row with its autoCreateTime set is not planned")
	}
}
