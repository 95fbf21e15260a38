package framework_test

import (
	"context"
	"errors"
	"net/http"
	"testing"

	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// setup opens a fresh database with a notes table of the engine's shape and
// returns a collection over it in mode.
func setup(t *testing.T, dsn string, mode framework.Mode) (*store.DB, *framework.Collection[Note]) {
	t.Helper()
	db, err := store.Open(context.Background(), dsn, store.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ddl := noteTable
	if db.Dialect.Name() == "postgres" {
		ddl = "CREATE TABLE notes (tenant_id TEXT NOT NULL, id UUID NOT NULL, version BIGINT NOT NULL, status TEXT NOT NULL, body TEXT NOT NULL, create_fingerprint TEXT NOT NULL, fingerprint TEXT NOT NULL, created_at TIMESTAMPTZ NOT NULL, updated_at TIMESTAMPTZ NOT NULL, deleted_at TIMESTAMPTZ, PRIMARY KEY (tenant_id, id))"
	}
	if err := db.Gorm.Exec(ddl).Error; err != nil {
		t.Fatal(err)
	}
	engine, err := framework.NewEngine(db, framework.EngineConfig{})
	if err != nil {
		t.Fatal(err)
	}
	col, err := framework.NewCollection(engine, framework.Resource[Note]{
		Name: "notes", Mode: mode,
		RenderFunc: func(n Note, m framework.Meta) any { return map[string]any{"id": m.ID, "title": n.Title} },
	})
	if err != nil {
		t.Fatal(err)
	}
	return db, col
}

func TestCreateOnlyRefusesADifferentBody(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		_, col := setup(t, dsn, framework.CreateOnly)
		ctx := context.Background()
		id := uuid.New()
		put := func(title string) (framework.Result, error) {
			return col.Put(ctx, framework.PutRequest[Note]{Tenant: "t1", ID: id, Command: Note{Title: title}, Header: http.Header{}})
		}
		first, err := put("a")
		if err != nil || first.Status != http.StatusCreated || first.Outcome != framework.OutcomeExecuted {
			t.Fatalf("create: %+v %v", first, err)
		}
		again, err := put("a")
		if err != nil || again.Status != http.StatusCreated || !again.Replayed || string(again.Body) != string(first.Body) {
			t.Fatalf("retry: %+v %v", again, err)
		}
		if _, err := put("b"); !errors.Is(err, framework.ErrIdempotencyKeyReuse) {
			t.Fatalf("different body on a create-only resource: %v, want idempotency_key_reuse", err)
		}
		got, err := col.Get(ctx, "t1", id)
		if err != nil || string(got.Body) != string(first.Body) {
			t.Fatalf("resource changed: %s %v", got.Body, err)
		}
	})
}

func TestPutTxRollsBackWithTheCaller(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		db, col := setup(t, dsn, framework.CreateOrReplace)
		ctx := context.Background()
		id := uuid.New()
		boom := errors.New("caller failed after the put")
		err := db.Write(ctx, func(tx *gorm.DB) error {
			res, err := col.PutTx(ctx, tx, framework.PutRequest[Note]{Tenant: "t1", ID: id, Command: Note{Title: "a"}, Header: http.Header{}})
			if err != nil || res.Status != http.StatusCreated {
				t.Fatalf("PutTx: %+v %v", res, err)
			}
			return boom
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Write = %v", err)
		}
		if _, err := col.Get(ctx, "t1", id); !errors.Is(err, framework.ErrNotFound) {
			t.Fatalf("the put survived its caller's rollback: %v", err)
		}
	})
}
