package migrations_test

import (
	"context"
	"strings"
	"testing"

	"github.com/pressly/goose/v3/database"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/migrations"
)

func openMySQL(t *testing.T) *store.DB {
	t.Helper()
	db, err := store.Open(context.Background(), testdb.New(t, "mysql"), store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// TestMySQLMigrationsRerunAfterACrash: DDL is not transactional on MySQL,
// so a migration that stopped half-way left some of its tables behind and
// no version row. Running Up again applies it from its first statement
// and succeeds; two processes starting at once take turns on the named
// lock.
func TestMySQLMigrationsRerunAfterACrash(t *testing.T) {
	t.Parallel()
	db := openMySQL(t)
	ctx := context.Background()
	// The first statements of 00001 and 00002, as a crash would leave them.
	for _, stmt := range []string{
		"CREATE SEQUENCE idempotency_records_fence_seq",
		"CREATE TABLE outbox_sequences (tenant_id VARCHAR(255) NOT NULL, aggregate_type VARCHAR(255) NOT NULL, aggregate_id VARCHAR(255) NOT NULL, last_seq BIGINT NOT NULL, PRIMARY KEY (tenant_id, aggregate_type, aggregate_id))",
	} {
		if _, err := db.SQL().ExecContext(ctx, stmt); err != nil {
			t.Fatal(err)
		}
	}
	upTwiceAtOnce(t, db)
	list, err := migrations.Status(ctx, db)
	if err != nil || len(list) < 4 {
		t.Fatalf("Status = %+v, %v", list, err)
	}
	for _, m := range list {
		if !m.Applied {
			t.Fatalf("migration %+v is not applied", m)
		}
	}
	var tables []string
	rows, err := db.SQL().QueryContext(ctx, "SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() ORDER BY table_name")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			t.Fatal(err)
		}
		tables = append(tables, name)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	want := "idempotency_operations idempotency_records idempotency_records_fence_seq idempotency_resolutions inbox_messages outbox_events outbox_published outbox_sequences " + migrations.VersionTable
	if got := strings.Join(tables, " "); got != want {
		t.Fatalf("tables = %s, want %s", got, want)
	}
}

// upTwiceAtOnce runs Up from two goroutines at once, as two processes
// starting together would.
func upTwiceAtOnce(t *testing.T, db *store.DB) {
	t.Helper()
	done := make(chan error, 2)
	for range 2 {
		go func() { done <- migrations.Up(context.Background(), db) }()
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
}

// TestMySQLMigrationsRerunAfterACrashBeforeTheZeroVersion: goose creates
// its version table and then inserts the row of version 0; on MySQL the
// CREATE TABLE commits at once, so a process that stopped between the two
// left a version table without that row, on which goose refuses every Up
// ("missing zero version migration"). Up writes the missing row, under
// the migrations' named lock, and applies everything; with two processes
// starting at once, the row is written once.
func TestMySQLMigrationsRerunAfterACrashBeforeTheZeroVersion(t *testing.T) {
	t.Parallel()
	db := openMySQL(t)
	ctx := context.Background()
	vs, err := database.NewStore(database.DialectMySQL, migrations.VersionTable)
	if err != nil {
		t.Fatal(err)
	}
	if err := vs.CreateVersionTable(ctx, db.SQL()); err != nil {
		t.Fatal(err)
	}
	upTwiceAtOnce(t, db)
	var zeros, versions int
	if err := db.SQL().QueryRowContext(ctx, "SELECT SUM(version_id = 0), COUNT(*) FROM "+migrations.VersionTable).Scan(&zeros, &versions); err != nil {
		t.Fatal(err)
	}
	list, err := migrations.Status(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if zeros != 1 || versions != len(list)+1 {
		t.Fatalf("%d rows of version 0 and %d rows in all, want 1 and %d (the zero and one per migration)", zeros, versions, len(list)+1)
	}
	for _, m := range list {
		if !m.Applied {
			t.Fatalf("migration %+v is not applied", m)
		}
	}
}

// TestMySQLKeysAreBytesAndUUIDsHaveOneSpelling: text keys compare byte
// for byte (utf8mb4_nopad_bin): 'k', 'K' and 'k ' are three keys, as on
// PostgreSQL. A UUID is one value however it is spelled (MariaDB's UUID
// type), so one UUID cannot be two rows; a value that does not fit is an
// error, never a truncated row.
func TestMySQLKeysAreBytesAndUUIDsHaveOneSpelling(t *testing.T) {
	t.Parallel()
	db := openMySQL(t)
	ctx := context.Background()
	if err := migrations.Up(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, agg := range []string{"k", "K", "k ", "ké"} {
		if _, err := db.SQL().ExecContext(ctx, "INSERT INTO outbox_sequences (tenant_id, aggregate_type, aggregate_id, last_seq) VALUES ('t', 'a', ?, 1)", agg); err != nil {
			t.Fatalf("aggregate %q: %v", agg, err)
		}
	}
	seq := 0
	event := func(id string) error {
		seq++
		_, err := db.SQL().ExecContext(ctx, `INSERT INTO outbox_events (id, tenant_id, type, aggregate_type, aggregate_id, seq, payload, headers, created_at, available_at)
VALUES (?, 't', 'e', 'a', 'x', ?, '{}', '{}', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`, id, seq)
		return err
	}
	if err := event("0190f3c4-5b6a-7c8d-9eaf-0123456789ab"); err != nil {
		t.Fatal(err)
	}
	// The same UUID spelled otherwise is the same value: the unique id
	// refuses it (1062); a text that is no UUID is refused (1292).
	for bad, code := range map[string]string{"0190F3C4-5B6A-7C8D-9EAF-0123456789AB": "Error 1062", "0190f3c45b6a7c8d9eaf0123456789ab": "Error 1062",
		"{0190f3c4-5b6a-7c8d-9eaf-0123456789ab}": "Error 1292"} {
		if err := event(bad); err == nil || !strings.Contains(err.Error(), code) {
			t.Fatalf("UUID spelled %q: %v, want %s", bad, err, code)
		}
	}
	_, err := db.SQL().ExecContext(ctx, "INSERT INTO inbox_messages (consumer, message_id, received_at) VALUES (?, 'm', UTC_TIMESTAMP(6))", strings.Repeat("c", 256))
	if err == nil || !strings.Contains(err.Error(), "Error 1406") {
		t.Fatalf("a too long value: %v, want error 1406 (data too long)", err)
	}
}
