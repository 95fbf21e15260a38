package tests

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/retrysafe/retrysafe/internal/redocly"
)

// TestOpenAPIDocumentPassesRedoclyLint lints the demo's /openapi.json with
// Redocly CLI's recommended rules: no error, and no warning but
// info-license (the demo declares no license of its own). It fails rather
// than skips under CI, where .ci/run installs the linter.
func TestOpenAPIDocumentPassesRedoclyLint(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite:"+t.TempDir()+"/openapi.db")
	rec := httptest.NewRecorder()
	e.app.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/openapi.json", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("GET /openapi.json: %d", rec.Code)
	}
	redocly.Lint(t, rec.Body.Bytes(), "info-license")
}
