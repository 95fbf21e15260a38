package tests

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrysafe/retrysafe/internal/redocly"
)

// TestOpenAPIDocumentPassesRedoclyLint lints the demo's documents, the
// OpenAPI 3.1 one at /openapi.json and the 3.0 one at /openapi-3.0.json,
// with Redocly CLI's recommended rules: no error, and no warning but
// info-license (the demo declares no license of its own). It fails rather
// than skips under CI, where .ci/run installs the linter.
func TestOpenAPIDocumentPassesRedoclyLint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite:"+t.TempDir()+"/openapi.db")
	for _, path := range []string{"/openapi.json", "/openapi-3.0.json"} {
		t.Run(path, func(t *testing.T) {
			rec := httptest.NewRecorder()
			e.app.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("GET %s: %d", path, rec.Code)
			}
			redocly.Lint(t, rec.Body.Bytes(), "info-license")
		})
	}
}
