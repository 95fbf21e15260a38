package storepg_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
)

// TestUUIDGoesOutAsSixteenBytes: once a connection has served a write
// transaction, a uuid.UUID parameter of a uuid column is encoded as its 16
// bytes (no detour through a string and an error), and one of a text
// column still as its string; both read back as written.
func TestUUIDGoesOutAsSixteenBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gdb := ownGorm(t) // skips without TEST_DATABASE_URL
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1)
	db, err := store.New(ctx, gdb, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("CREATE TABLE ids (id UUID PRIMARY KEY, as_text TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	id := uuid.New()
	if err := db.Write(ctx, func(tx *gorm.DB) error {
		return tx.Exec("INSERT INTO ids (id, as_text) VALUES (?, ?)", id, id).Error
	}); err != nil {
		t.Fatal(err)
	}
	var got struct {
		ID     uuid.UUID
		AsText string
	}
	if err := gdb.Raw("SELECT id, as_text FROM ids WHERE id = ?", id).Scan(&got).Error; err != nil {
		t.Fatal(err)
	}
	if got.ID != id || got.AsText != id.String() {
		t.Fatalf("read back %+v, want %s twice", got, id)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var plan string
	if err := conn.Raw(func(dc any) error {
		m := dc.(interface{ Conn() *pgx.Conn }).Conn().TypeMap()
		plan = fmt.Sprintf("%T", m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if plan != "*storepg.uuidEncodePlan" {
		t.Fatalf("a uuid.UUID is encoded by %s", plan)
	}
}
