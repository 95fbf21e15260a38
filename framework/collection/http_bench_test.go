package collection_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/gin-gonic/gin"
	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// benchRouter is the invoices collection of dialect mounted as the
// harness mounts it, served in process (no network).
func benchRouter(b *testing.B, dialect string) http.Handler {
	b.Helper()
	col := benchCollection(b, dialect)
	auth, err := server.NewStaticTokens(map[string]string{"tok1": "t1"})
	if err != nil {
		b.Fatal(err)
	}
	gin.SetMode(gin.ReleaseMode)
	router := gin.New()
	col.Mount(router.Group("/v1", server.RequireAuth(auth, nil)))
	return router
}

// serveBench sends one PUT of body to path through h and checks its status.
func serveBench(b *testing.B, h http.Handler, path string, body []byte, status int) {
	req := httptest.NewRequest(http.MethodPut, path, bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer tok1")
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	h.ServeHTTP(w, req)
	if w.Code != status {
		b.Fatalf("PUT %s: %d %s, want %d", path, w.Code, w.Body, status)
	}
}

// BenchmarkHTTPPutCreate measures a PUT of a new ID through the HTTP
// handler: the request front (read, replay cache key, bind, fingerprint)
// and the create.
func BenchmarkHTTPPutCreate(b *testing.B) {
	body := invoiceBody("cus_1", 100, 250)
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			h := benchRouter(b, dialect)
			b.ReportAllocs()
			for b.Loop() {
				serveBench(b, h, invoicePath(uuid.New()), body, http.StatusCreated)
			}
		})
	}
}

// BenchmarkHTTPPutReplay measures a retry of a PUT already replayed once,
// through the HTTP handler: answered from the replay cache and one read.
func BenchmarkHTTPPutReplay(b *testing.B) {
	body := invoiceBody("cus_1", 100, 250)
	for _, dialect := range testdb.Dialects() {
		b.Run(dialect, func(b *testing.B) {
			h := benchRouter(b, dialect)
			path := invoicePath(uuid.New())
			serveBench(b, h, path, body, http.StatusCreated)
			serveBench(b, h, path, body, http.StatusCreated) // kept in the cache
			b.ReportAllocs()
			for b.Loop() {
				serveBench(b, h, path, body, http.StatusCreated)
			}
		})
	}
}
