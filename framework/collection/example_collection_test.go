package collection_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the SQLite driver
)

// openNotes opens a SQLite file in dir with the notes table and the
// collection over it.
func openNotes(ctx context.Context, dir string, mode collection.Mode) (*store.DB, *collection.Collection[Note, Note]) {
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "notes.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	if err := db.Gorm.AutoMigrate(&Note{}); err != nil {
		panic(err)
	}
	engine, _ := framework.NewEngine(db, framework.EngineConfig{})
	notes, err := collection.New(engine, collection.Resource[Note, Note]{Name: "notes", Mode: mode})
	if err != nil {
		panic(err)
	}
	return db, notes
}

// A CreateOnly collection: a retry of the create replays it, and a PUT of
// another body to the same ID is refused (422 idempotency_key_reuse),
// however late it comes.
func ExampleNew() {
	dir, _ := os.MkdirTemp("", "retrysafe-example")
	defer os.RemoveAll(dir)
	db, notes := openNotes(context.Background(), dir, collection.CreateOnly)
	defer db.Close()

	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	auth, _ := server.NewStaticTokens(map[string]string{"sk_example": "tenant-1"})
	notes.Mount(router.Group("/v1", server.RequireAuth(auth, nil)))
	put := func(body string) {
		req := httptest.NewRequest(http.MethodPut, "/v1/notes/0b7e4c9a-5d6f-4e1a-9b2c-3d4e5f6a7b8c", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk_example")
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		fmt.Println(rec.Code, "replayed:", rec.Header().Get("Idempotent-Replayed") == "true")
	}
	put(`{"title":"v1"}`)
	put(`{"title":"v1"}`)
	put(`{"title":"v2"}`)
	// Output:
	// 201 replayed: false
	// 201 replayed: true
	// 422 replayed: false
}

// PutTx creates the note inside the caller's transaction: the caller's own
// row (here an audit line) and the note commit together, or neither does.
func ExampleCollection_PutTx() {
	dir, _ := os.MkdirTemp("", "retrysafe-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, notes := openNotes(ctx, dir, collection.CreateOrReplace)
	defer db.Close()
	db.Gorm.Exec("CREATE TABLE audit (line TEXT NOT NULL)")

	id := uuid.MustParse("5c2a7e10-8f3b-4d6c-a1e2-b3c4d5e6f708")
	var res collection.Result
	err := db.Write(ctx, func(tx *gorm.DB) error {
		if err := tx.Exec("INSERT INTO audit (line) VALUES (?)", "note "+id.String()+" created").Error; err != nil {
			return err
		}
		var err error
		res, err = notes.PutTx(ctx, tx, collection.PutRequest[Note]{Tenant: "tenant-1", ID: id, Command: Note{Title: "in one transaction"}})
		return err
	})
	if err != nil {
		panic(err)
	}
	var lines int64
	db.Gorm.Raw("SELECT count(*) FROM audit").Scan(&lines)
	fmt.Println(res.Status, res.Outcome, res.Location)
	fmt.Println("audit lines:", lines)
	// Output:
	// 201 executed /v1/notes/5c2a7e10-8f3b-4d6c-a1e2-b3c4d5e6f708
	// audit lines: 1
}

// The legacy POST route creates through the PUT engine under an ID derived
// from the Idempotency-Key, so a retried POST replays the create (same
// Location) and announces its PUT successor.
func ExampleCollection_MountLegacyPOST() {
	dir, _ := os.MkdirTemp("", "retrysafe-example")
	defer os.RemoveAll(dir)
	db, notes := openNotes(context.Background(), dir, collection.CreateOrReplace)
	defer db.Close()

	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	auth, _ := server.NewStaticTokens(map[string]string{"sk_example": "tenant-1"})
	v1 := router.Group("/v1", server.RequireAuth(auth, nil))
	notes.Mount(v1)
	if err := notes.MountLegacyPOST(v1, collection.LegacyConfig{DeprecatedSince: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}); err != nil {
		panic(err)
	}
	post := func(body string) {
		req := httptest.NewRequest(http.MethodPost, "/v1/notes", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer sk_example")
		req.Header.Set("Idempotency-Key", "note-42")
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		fmt.Println(rec.Code, "replayed:", rec.Header().Get("Idempotent-Replayed") == "true",
			"PUT form:", rec.Header().Get("Location") == "/v1/notes/"+collection.LegacyID("notes", "note-42").String())
	}
	post(`{"title":"hello"}`)
	post(`{"title":"hello"}`)
	post(`{"title":"other"}`)
	// Output:
	// 201 replayed: false PUT form: true
	// 201 replayed: true PUT form: true
	// 422 replayed: false PUT form: false
}
