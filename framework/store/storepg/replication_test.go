package storepg_test

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/pgtemp"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// TestCommitNotConfirmedByTheStandbyIsNotAcknowledged: on a server that
// waits for a synchronous standby that does not answer, COMMIT waits; an
// operator cancels the waiting backend (pg_cancel_backend, as one does
// while a standby is down). PostgreSQL has then committed locally, and
// answers success with a WARNING; a failover to the standby would lose the
// row. Write must report it as unavailable (503, retried with the same ID
// or key), not as committed.
func TestCommitNotConfirmedByTheStandbyIsNotAcknowledged(t *testing.T) {
	t.Parallel()
	srv := pgtemp.Start(t)
	ctx := context.Background()
	dsn := srv.CreateDatabase("syncrep")
	admin, err := sql.Open("pgx", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	for _, q := range []string{
		"CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)",
		// A standby that does not exist: every commit waits for it.
		"ALTER SYSTEM SET synchronous_standby_names = 'nobody'",
		"SELECT pg_reload_conf()",
	} {
		if _, err := admin.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	// The reload reaches new sessions once the postmaster has read it.
	for {
		conn, err := admin.Conn(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var names string
		err = conn.QueryRowContext(ctx, "SHOW synchronous_standby_names").Scan(&names)
		_ = conn.Raw(func(any) error { return errors.New("discard this session") })
		_ = conn.Close()
		if err != nil {
			t.Fatal(err)
		}
		if names == "nobody" {
			break
		}
	}
	db, err := store.Open(ctx, dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	done := make(chan error, 1)
	go func() {
		done <- db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv VALUES ('a', 1)").Error })
	}()
	// The event: a backend waits in COMMIT for the standby.
	for cancelled := false; !cancelled; {
		if err := admin.QueryRowContext(ctx, "SELECT count(pg_cancel_backend(pid)) > 0 FROM pg_stat_activity WHERE wait_event = 'SyncRep'").Scan(&cancelled); err != nil {
			t.Fatal(err)
		}
	}
	err = <-done
	if !errors.Is(err, store.ErrUnavailable) || !strings.Contains(err.Error(), "synchronous standby") {
		t.Fatalf("Write whose commit the standby never confirmed = %v, want ErrUnavailable naming the standby", err)
	}
	var n int
	if err := admin.QueryRowContext(ctx, "SELECT count(*) FROM kv").Scan(&n); err != nil || n != 1 {
		t.Fatalf("rows = %d (%v): the commit was local, as PostgreSQL reported", n, err)
	}
}

// TestAStandbysRefusalClosesTheConnection: a connection to a server that
// refuses writes (25006 read_only_sql_transaction: a former primary that
// became a standby, or a read-only session) makes the write 503 and is
// not reused: the next statement runs on a new connection.
func TestAStandbysRefusalClosesTheConnection(t *testing.T) {
	t.Parallel()
	testdb.Postgres(t)
	ctx := context.Background()
	db, err := store.Open(ctx, testdb.New(t, "postgres"), store.Config{MaxOpenConns: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Gorm.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
		t.Fatal(err)
	}
	var before int
	if err := db.Gorm.Raw("SELECT pg_backend_pid()").Scan(&before).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Exec("SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY").Error; err != nil {
		t.Fatal(err)
	}
	err = db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv VALUES ('a', 1)").Error })
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("a write on a read-only connection = %v, want ErrUnavailable", err)
	}
	var after int
	var readOnly string
	if err := db.Gorm.Raw("SELECT pg_backend_pid()").Scan(&after).Error; err != nil {
		t.Fatal(err)
	}
	if err := db.Gorm.Raw("SHOW transaction_read_only").Scan(&readOnly).Error; err != nil {
		t.Fatal(err)
	}
	if after == before || readOnly != "off" {
		t.Fatalf("after the refusal: backend %d (was %d), transaction_read_only %s: the read-only connection was reused", after, before, readOnly)
	}
	if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv VALUES ('a', 1)").Error }); err != nil {
		t.Fatalf("the write on a new connection: %v", err)
	}
}
