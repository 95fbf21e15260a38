package collection_test

import (
	"context"
	"fmt"
	"io"
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

// Example_serveMux mounts the framework's gin engine inside a plain
// net/http service, under a prefix of its own: http.StripPrefix hands gin
// the path it routes, and the collection's BasePath keeps the Location
// headers right for the outside. (Without StripPrefix, register the gin
// routes under the full prefix instead.) Any router that mounts an
// http.Handler (chi's Mount, gorilla/mux's PathPrefix) mounts it the same
// way. A create and its retry go through the mount over real HTTP.
func Example_serveMux() {
	dir, _ := os.MkdirTemp("", "retrysafe-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()
	db, err := store.Open(ctx, "sqlite:"+filepath.Join(dir, "notes.db"), store.Config{})
	if err != nil {
		panic(err)
	}
	defer db.Close()
	if err := db.Gorm.AutoMigrate(&Note{}); err != nil {
		panic(err)
	}
	engine, _ := framework.NewEngine(db, framework.EngineConfig{})
	notes, err := collection.New(engine, collection.Resource[Note, Note]{
		Name:     "notes",
		BasePath: "/notes-api/v1/notes", // as clients see it, prefix included
	})
	if err != nil {
		panic(err)
	}
	auth, _ := server.NewStaticTokens(map[string]string{"sk_example": "tenant-1"})
	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	server.UseProblemHandlers(router, nil)
	notes.Mount(router.Group("/v1", server.RequireAuth(auth, nil)))

	// The service's own mux: its routes, and the gin engine under /notes-api/.
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "ok") })
	mux.Handle("/notes-api/", http.StripPrefix("/notes-api", router))
	// Every route of the process behind the framing rules (server.New
	// applies them to the *http.Server it builds).
	srv := httptest.NewServer(server.Framing(mux))
	defer srv.Close()

	put := func() (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPut, srv.URL+"/notes-api/v1/notes/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f",
			strings.NewReader(`{"title":"hello","body":"retry me"}`))
		req.Header.Set("Authorization", "Bearer sk_example")
		res, err := srv.Client().Do(req)
		if err != nil {
			panic(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		return res, string(body)
	}
	first, firstBody := put()
	retry, retryBody := put()
	var rows int64
	db.Gorm.Model(&Note{}).Count(&rows)
	fmt.Println(first.StatusCode, first.Header.Get("Location"))
	fmt.Println(retry.StatusCode, retry.Header.Get("Idempotent-Replayed"), retryBody == firstBody, rows)
	// Output:
	// 201 /notes-api/v1/notes/6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f
	// 201 true true 1
}
