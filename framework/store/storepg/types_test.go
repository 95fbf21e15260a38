package storepg_test

import (
	"context"
	"database/sql"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/store/storepg"
)

// TestUUIDGoesOutAsSixteenBytes: once a connection has served a write
// transaction, a uuid.UUID parameter of a uuid column is encoded as its 16
// bytes (no detour through a string and an error), and one of a text
// column still as its string; both read back as written.
func TestUUIDGoesOutAsSixteenBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gdb, sqlDB, db := idsTable(t)
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

// TestUUIDArgGoesOutAsSixteenBytesOnAnyConnection: the ID the framework's
// row read sends (storepg.UUIDArg, the rows' spelling) is encoded as its 16 bytes by
// pgx's own uuid codec on a connection that has served no write
// transaction (where a uuid.UUID goes through its string and an error),
// and as its string for a text column; both select the row written.
func TestUUIDArgGoesOutAsSixteenBytesOnAnyConnection(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	gdb, sqlDB, _ := idsTable(t)
	id := uuid.New()
	if err := gdb.Exec("INSERT INTO ids (id, as_text) VALUES (?, ?)", id, id).Error; err != nil {
		t.Fatal(err)
	}
	// A new connection: store.New's check taught the one it used.
	sqlDB.SetMaxIdleConns(0)
	sqlDB.SetMaxIdleConns(1)
	arg := storepg.UUIDArg(id)
	var n int
	if err := sqlDB.QueryRowContext(ctx, "SELECT count(*) FROM ids WHERE id = $1 AND as_text = $2", arg, arg).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Fatalf("selected %d rows by the UUID argument, want 1", n)
	}
	conn, err := sqlDB.Conn(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var plain, asArg string
	if err := conn.Raw(func(dc any) error {
		m := dc.(interface{ Conn() *pgx.Conn }).Conn().TypeMap()
		plain = fmt.Sprintf("%T", m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, id))
		asArg = fmt.Sprintf("%T", m.PlanEncode(pgtype.UUIDOID, pgtype.BinaryFormatCode, arg))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if plain != "*pgtype.encodePlanDriverValuer" {
		t.Fatalf("on a connection no write has taught, a uuid.UUID is encoded by %s: the test no longer shows what UUIDArg avoids", plain)
	}
	if asArg != "pgtype.encodePlanUUIDCodecBinaryUUIDValuer" {
		t.Fatalf("the driver's UUID argument is encoded by %s", asArg)
	}
}

// idsTable opens a store on a pool of one connection of a database of
// its own, with a table of a uuid and a text column.
func idsTable(t *testing.T) (*gorm.DB, *sql.DB, *store.DB) {
	gdb := ownGorm(t) // skips without TEST_DATABASE_URL
	sqlDB, err := gdb.DB()
	if err != nil {
		t.Fatal(err)
	}
	sqlDB.SetMaxOpenConns(1)
	db, err := store.New(context.Background(), gdb, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if err := gdb.Exec("CREATE TABLE ids (id UUID PRIMARY KEY, as_text TEXT NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	return gdb, sqlDB, db
}
