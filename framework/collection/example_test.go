package collection_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"

	"github.com/retrysafe/retrysafe/framework/server"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/collection"
	"github.com/retrysafe/retrysafe/framework/store"
	_ "github.com/retrysafe/retrysafe/framework/store/storesqlite" // the SQLite driver
)

// Note is both the command (the typed body of PUT /v1/notes/{id}) and the
// gorm model: it embeds the engine's system columns.
type Note struct {
	collection.System
	Title string `json:"title" validate:"required,max=100" gorm:"not null"`
	Body  string `json:"body" validate:"max=10000" gorm:"not null"`
}

// Example defines a resource of one's own on the PUT pattern over a gorm
// model, creates its table with AutoMigrate, mounts it and sends a create
// and its retry.
func Example() {
	dir, _ := os.MkdirTemp("", "retrysafe-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "notes.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := db.Gorm.AutoMigrate(&Note{}); err != nil { // or a goose migration
		panic(err)
	}

	engine, _ := framework.NewEngine(db, framework.EngineConfig{})
	notes, err := collection.New(engine, collection.Resource[Note, Note]{
		Name: "notes",
		Mode: collection.CreateOrReplace,
	})
	if err != nil {
		panic(err)
	}
	auth, _ := server.NewStaticTokens(map[string]string{"sk_example": "tenant-1"})

	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	notes.Mount(router.Group("/v1", server.RequireAuth(auth, nil)))

	put := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPut, "/v1/notes/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
			strings.NewReader(`{"title":"hello","body":"retry me"}`))
		req.Header.Set("Authorization", "Bearer sk_example")
		rec := httptest.NewRecorder()
		router.ServeHTTP(rec, req)
		return rec
	}
	first, retry := put(), put()
	fmt.Println(first.Code, first.Header().Get("Location"))
	fmt.Println(retry.Code, retry.Header().Get("Idempotent-Replayed"), retry.Body.String() == first.Body.String())
	fmt.Println(strings.Contains(first.Body.String(), `"version":1,`), strings.HasSuffix(first.Body.String(), `"title":"hello","body":"retry me"}`))
	// Output:
	// 201 /v1/notes/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f
	// 201 true true
	// true true
}
