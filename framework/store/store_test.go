package store_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

func TestOpenRejectsUnknownDSN(t *testing.T) {
	t.Parallel()
	for _, dsn := range []string{"", "mysql://x", "sqlite:"} {
		if _, err := store.Open(context.Background(), dsn, store.Config{}); !errors.Is(err, store.ErrUnknownDSN) {
			t.Fatalf("Open(%q) = %v, want ErrUnknownDSN", dsn, err)
		}
	}
}

func TestOpenUnreachablePostgresIsUnavailable(t *testing.T) {
	t.Parallel()
	_, err := store.Open(context.Background(), "postgres://postgres@127.0.0.1:1/none?connect_timeout=2", store.Config{})
	if !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Open on a closed port = %v, want ErrUnavailable", err)
	}
}

// TestDialectContract is what every dialect must do: a row lock held by
// one transaction makes a second writer fail with ErrLockTimeout after the
// lock timeout, not wait forever and not succeed; Write commits on nil and
// rolls back on error.
func TestDialectContract(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ctx := context.Background()
		db, err := store.Open(ctx, dsn, store.Config{LockTimeout: 200 * time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Gorm.Exec("CREATE TABLE kv (k TEXT PRIMARY KEY, v INTEGER NOT NULL)").Error; err != nil {
			t.Fatal(err)
		}
		if err := db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("INSERT INTO kv VALUES ('a', 1)").Error }); err != nil {
			t.Fatal(err)
		}
		boom := errors.New("boom")
		if err := db.Write(ctx, func(tx *gorm.DB) error {
			if err := tx.Exec("UPDATE kv SET v = 2").Error; err != nil {
				return err
			}
			return boom
		}); !errors.Is(err, boom) {
			t.Fatalf("Write = %v, want boom", err)
		}

		locked, release, done := make(chan struct{}), make(chan struct{}), make(chan error, 1)
		go func() {
			done <- db.Write(ctx, func(tx *gorm.DB) error {
				var v int
				if err := db.Dialect.LockRow(tx.Table("kv").Select("v").Where("k = ?", "a")).Scan(&v).Error; err != nil {
					return err
				}
				close(locked)
				<-release
				return nil
			})
		}()
		<-locked
		start := time.Now()
		err = db.Write(ctx, func(tx *gorm.DB) error { return tx.Exec("UPDATE kv SET v = v + 10 WHERE k = 'a'").Error })
		waited := time.Since(start)
		close(release)
		if herr := <-done; herr != nil {
			t.Fatal(herr)
		}
		if !errors.Is(err, store.ErrLockTimeout) {
			t.Fatalf("second writer = %v, want ErrLockTimeout", err)
		}
		if waited > 5*time.Second {
			t.Fatalf("second writer waited %v, far past the lock timeout", waited)
		}
		var v int
		if err := db.Gorm.Raw("SELECT v FROM kv WHERE k = 'a'").Scan(&v).Error; err != nil || v != 1 {
			t.Fatalf("v = %d (%v), want 1: the rollback and the timed-out write left no trace", v, err)
		}
	})
}

// TestSQLSpansRedactErrors: a statement the database refuses, quoting the
// value it refused, leaves no trace of that value in the SQL spans.
func TestSQLSpansRedactErrors(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		rec := tracetest.NewSpanRecorder()
		tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
		db, err := store.Open(context.Background(), dsn, store.Config{TracerProvider: tp})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = db.Close() })
		const secret = "secret-value-4711"
		query := "SELECT CAST(? AS uuid)"
		if db.Dialect.Name() == "sqlite" {
			query = "SELECT json(?)" // malformed JSON: refused
		}
		// otelpgx traces only under a recording span, as in a request.
		ctx, root := tp.Tracer("test").Start(context.Background(), "request")
		gdb := db.Gorm.WithContext(ctx)
		err = gdb.Exec(query, secret).Error
		if err == nil {
			t.Fatal("the database took a value it must refuse")
		}
		if db.Dialect.Name() == "postgres" && !strings.Contains(err.Error(), secret) {
			// The refusal quotes the value: the case the redaction is for.
			t.Fatalf("PostgreSQL's refusal %v does not quote the value", err)
		}
		root.End()
		var errored int
		for _, s := range rec.Ended() {
			if s.Status().Code == codes.Error {
				errored++
			}
			texts := []string{s.Name(), s.Status().Description}
			for _, ev := range s.Events() {
				for _, a := range ev.Attributes {
					texts = append(texts, a.Value.Emit())
				}
			}
			for _, a := range s.Attributes() {
				texts = append(texts, a.Value.Emit())
			}
			for _, text := range texts {
				if strings.Contains(text, secret) {
					t.Fatalf("span %q carries the refused value: %q", s.Name(), text)
				}
			}
		}
		if errored == 0 {
			t.Fatal("no SQL span recorded the failure")
		}
	})
}
