package storesqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"testing"

	"github.com/glebarez/go-sqlite"

	"github.com/retrysafe/retrysafe/framework/store"
)

func TestClassifySQLite(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"context deadline", context.DeadlineExceeded, "unavailable"},
		{"bad conn", fmt.Errorf("x: %w", io.EOF), "unavailable"},
		{"plain", errors.New("boom"), ""},
	} {
		if got := outcome(Driver{}.Classify(tc.err)); got != tc.want {
			t.Fatalf("%s: classify = %q, want %q", tc.name, got, tc.want)
		}
	}
	// A real SQLite error: a file that cannot be opened.
	db, err := sql.Open("sqlite", "file:"+t.TempDir()+"/missing/dir/x.db")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Ping()
	var sqlErr *sqlite.Error
	if !errors.As(err, &sqlErr) {
		t.Fatalf("ping of an unopenable file = %v, want a *sqlite.Error", err)
	}
	if got := outcome(Driver{}.Classify(err)); got != "unavailable" {
		t.Fatalf("classify(%v) = %q, want unavailable", err, got)
	}
}

// TestClassifyConstraints: a real duplicate key is a unique violation;
// another constraint is not.
func TestClassifyConstraints(t *testing.T) {
	t.Parallel()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(t.TempDir(), "c.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE TABLE t (id INTEGER PRIMARY KEY, name TEXT UNIQUE, n INTEGER CHECK (n > 0))", "INSERT INTO t VALUES (1, 'a', 1)"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct{ q, want string }{
		{"INSERT INTO t VALUES (1, 'b', 1)", "unique"},
		{"INSERT INTO t VALUES (2, 'a', 1)", "unique"},
		{"INSERT INTO t VALUES (3, 'c', 0)", ""},
	} {
		_, err := db.Exec(tc.q)
		if err == nil {
			t.Fatalf("%s succeeded", tc.q)
		}
		if got := outcome(Driver{}.Classify(err)); got != tc.want {
			t.Errorf("%s: %v classified %q, want %q", tc.q, err, got, tc.want)
		}
	}
}

// TestClassifyBusy: a writer that finds the database's write lock taken is
// busy, never a row's lock timeout, whatever it was writing.
func TestClassifyBusy(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "b.db")
	holder, err := sql.Open("sqlite", "file:"+path+"?_pragma=journal_mode(WAL)")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	holder.SetMaxOpenConns(1)
	for _, q := range []string{"CREATE TABLE t (k TEXT PRIMARY KEY)", "BEGIN IMMEDIATE", "INSERT INTO t VALUES ('a')"} {
		if _, err := holder.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	defer func() { _, _ = holder.Exec("ROLLBACK") }()
	waiter, err := sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(1)")
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	_, err = waiter.Exec("INSERT INTO t VALUES ('b')")
	if got := outcome(Driver{}.Classify(err)); got != "busy" {
		t.Fatalf("an insert behind another writer: %v classified %q, want busy", err, got)
	}
}

func outcome(err error) string {
	switch {
	case errors.Is(err, store.ErrUnavailable):
		return "unavailable"
	case errors.Is(err, store.ErrLockTimeout) && errors.Is(err, store.ErrBusy):
		return "busy"
	case errors.Is(err, store.ErrLockTimeout):
		return "lock"
	case errors.Is(err, store.ErrUniqueViolation):
		return "unique"
	}
	return ""
}
