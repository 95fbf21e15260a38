package reference_test

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/gin-gonic/gin"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/openapi"
	"github.com/retrysafe/retrysafe/framework/openapi/reference"
)

func document(t *testing.T) *openapi.Document {
	t.Helper()
	doc, err := openapi.New(openapi.Config{Title: "Things API", Version: "1"},
		framework.DescribeGet("/v1/things", "things.list", "List things", nil))
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

func get(t *testing.T, h http.Handler, method, target string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec
}

// The page, its assets and the document are all served under Path: the
// page names no other origin, so it renders with no network.
func TestServesThePageItsAssetsAndTheDocument(t *testing.T) {
	t.Parallel()
	doc := document(t)
	for _, path := range []string{"", "/api/reference"} {
		ref, err := reference.New(doc, reference.Config{Path: path})
		if err != nil {
			t.Fatal(err)
		}
		base := path
		if base == "" {
			base = reference.DefaultPath
		}
		page := get(t, ref, http.MethodGet, base+"/")
		if page.Code != http.StatusOK || !strings.HasPrefix(page.Header().Get("Content-Type"), "text/html") ||
			!strings.Contains(page.Body.String(), "<title>Things API") || !strings.Contains(page.Body.String(), `"`+base+`/openapi.json"`) {
			t.Fatalf("%s/: %d %s", base, page.Code, page.Body.Bytes())
		}
		assets := regexp.MustCompile(`(?:src|href)="([^"]*)"`).FindAllStringSubmatch(page.Body.String(), -1)
		if len(assets) < 3 {
			t.Fatalf("%s/ loads %v", base, assets)
		}
		for _, a := range assets {
			if !strings.HasPrefix(a[1], base+"/") {
				t.Fatalf("%s/ loads %s, which is not under %s/", base, a[1], base)
			}
			if rec := get(t, ref, http.MethodGet, a[1]); rec.Code != http.StatusOK || rec.Body.Len() == 0 {
				t.Fatalf("%s: %d", a[1], rec.Code)
			}
		}
		if body := page.Body.String(); regexp.MustCompile(`(?:src|href)="https?:`).MatchString(body) {
			t.Fatalf("%s/ loads from another origin: %s", base, body)
		}
		served := get(t, ref, http.MethodGet, base+"/openapi.json")
		if served.Code != http.StatusOK || !bytes.Equal(served.Body.Bytes(), doc.JSON()) {
			t.Fatalf("%s/openapi.json: %d", base, served.Code)
		}
		if rec := get(t, ref, http.MethodHead, base+"/"); rec.Code != http.StatusOK {
			t.Fatalf("HEAD %s/: %d", base, rec.Code)
		}
		post := get(t, ref, http.MethodPost, base+"/")
		if post.Code != http.StatusMethodNotAllowed || post.Header().Get("Allow") != "GET, HEAD" ||
			post.Header().Get("Content-Type") != "application/problem+json" {
			t.Fatalf("POST %s/: %d %v", base, post.Code, post.Header())
		}
	}
}

func TestRefusesBadConfig(t *testing.T) {
	t.Parallel()
	if _, err := reference.New(nil, reference.Config{}); err == nil {
		t.Fatal("a nil document was accepted")
	}
	for _, path := range []string{"docs", "/docs/", "/", "/docs?x"} {
		if _, err := reference.New(document(t), reference.Config{Path: path}); err == nil {
			t.Fatalf("Path %q was accepted", path)
		}
	}
}

// The one-line mounts of the package's documentation: on gin and on a
// net/http ServeMux, the page is at /docs/, /docs redirects to it, and
// the assets and the document are served.
func TestOneLineMounts(t *testing.T) {
	t.Parallel()
	gin.SetMode(gin.TestMode)
	ref, err := reference.New(document(t), reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	router := gin.New()
	router.GET("/docs/*any", gin.WrapH(ref))
	mux := http.NewServeMux()
	mux.Handle("GET /docs/", ref)
	for name, h := range map[string]http.Handler{"gin": router, "net/http": mux} {
		if rec := get(t, h, http.MethodGet, "/docs"); rec.Code/100 != 3 || rec.Header().Get("Location") != "/docs/" {
			t.Fatalf("%s: GET /docs: %d %v", name, rec.Code, rec.Header())
		}
		for _, target := range []string{"/docs/", "/docs/openapi.json", "/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css"} {
			if rec := get(t, h, http.MethodGet, target); rec.Code != http.StatusOK {
				t.Fatalf("%s: GET %s: %d", name, target, rec.Code)
			}
		}
	}
}

// TestAssetsOnlyWhenMounted: the framework's packages but this one do not
// depend on the embedded Swagger UI, so a service that does not mount the
// page does not link its assets.
func TestAssetsOnlyWhenMounted(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("the go command is not on PATH")
	}
	out, err := exec.Command("go", "list", "-f", `{{.ImportPath}} {{join .Deps " "}}`,
		"github.com/retrysafe/retrysafe/framework/...", "github.com/retrysafe/retrysafe/fallback/...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	for line := range strings.Lines(string(out)) {
		pkg, deps, _ := strings.Cut(strings.TrimSpace(line), " ")
		if pkg == "github.com/retrysafe/retrysafe/framework/openapi/reference" {
			continue
		}
		for dep := range strings.FieldsSeq(deps) {
			if strings.HasPrefix(dep, "github.com/swaggest/") {
				t.Fatalf("%s depends on %s", pkg, dep)
			}
		}
	}
}
