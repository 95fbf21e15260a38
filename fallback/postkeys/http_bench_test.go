package postkeys

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"
	"gorm.io/gorm"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// benchNote is the command of the benchmarks' operation.
type benchNote struct {
	Title string   `json:"title" validate:"required,max=64"`
	Tags  []string `json:"tags" validate:"max=8"`
	Count int      `json:"count" validate:"min=0"`
}

// benchPost is a local operation that writes nothing of its own, mounted
// at POST /v1/notes on a fresh database of dialect; it returns a function
// that POSTs body with key and checks the status.
func benchPost(b *testing.B, dialect string) func(key string, body string, status int) {
	b.Helper()
	keys := claimBench(b, dialect)
	b.Cleanup(keys.Stop)
	notes, err := Register(keys, Operation[benchNote]{
		Name: "notes", Mode: Local,
		ExecuteFunc: func(ctx context.Context, tx *gorm.DB, req Request[benchNote]) (Response, error) {
			return JSON(http.StatusCreated, map[string]string{"title": req.Command.Title}, "")
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	auth, err := server.NewStaticTokens(map[string]string{"tok": "t1"})
	if err != nil {
		b.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	router.POST("/v1/notes", server.RequireAuth(auth, nil), notes.Handle)
	return func(key, body string, status int) {
		req := httptest.NewRequest(http.MethodPost, "/v1/notes", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Idempotency-Key", key)
		w := httptest.NewRecorder()
		router.ServeHTTP(w, req)
		if w.Code != status {
			b.Fatalf("POST %s: %d %s, want %d", key, w.Code, w.Body, status)
		}
	}
}

const benchNoteBody = `{"title":"groceries","tags":["home","weekly"],"count":3}`

// BenchmarkHTTPPostCreate measures a POST with a new key through the
// handler: the request front, the claim and the completion.
func BenchmarkHTTPPostCreate(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			post := benchPost(b, dialect)
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				post("k"+strconv.Itoa(i), benchNoteBody, http.StatusCreated)
			}
		})
	}
}

// BenchmarkHTTPPostReplay measures a retry of a POST already replayed
// once: answered from the replay cache and the record.
func BenchmarkHTTPPostReplay(b *testing.B) {
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			post := benchPost(b, dialect)
			post("k", benchNoteBody, http.StatusCreated)
			post("k", benchNoteBody, http.StatusCreated) // kept in the cache
			b.ReportAllocs()
			for b.Loop() {
				post("k", benchNoteBody, http.StatusCreated)
			}
		})
	}
}
