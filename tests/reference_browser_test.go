package tests

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	cdppage "github.com/chromedp/cdproto/page"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/getkin/kin-openapi/openapi3"
)

// chromiumPath is the browser the reference page test drives: Debian's
// chromium package (.ci/run installs it).
const chromiumPath = "/usr/bin/chromium"

// artifactsDir is where tests keep what a person may want to look at
// after a run (the reference page's screenshot): $RETRYSAFE_TEST_ARTIFACTS,
// or retrysafe-test-artifacts in the system's temporary directory.
func artifactsDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("RETRYSAFE_TEST_ARTIFACTS")
	if dir == "" {
		dir = filepath.Join(os.TempDir(), "retrysafe-test-artifacts")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// renderedOperation is what the page shows of one operation, and where.
type renderedOperation struct {
	Method, Path, Summary string
	Visible               bool
	Params                []renderedRow // name, where ("(header)"), description
	Responses             []renderedResponse
	X, Y, Width, Height   float64
}

type renderedRow struct{ Name, In, Description string }

type renderedResponse struct {
	Status, Description string
	Headers             []renderedRow
}

// renderedOperations reads, for each operation block of Swagger UI, the
// text a person sees in its summary line, its parameters table and its
// answers table.
const renderedOperations = `[...document.querySelectorAll('.opblock')].map(b => {
	const text = (el, sel) => el.querySelector(sel)?.innerText.trim() ?? '';
	const r = b.getBoundingClientRect();
	return {
		Method: text(b, '.opblock-summary-method'),
		Path: text(b, '.opblock-summary-path, .opblock-summary-path__deprecated'),
		Summary: text(b, '.opblock-summary-description'),
		Visible: r.height > 0,
		Params: [...b.querySelectorAll('table.parameters > tbody > tr')].map(tr => ({
			Name: text(tr, '.parameter__name').replace(/\s*\*$/, ''),
			In: text(tr, '.parameter__in'),
			Description: text(tr, '.parameters-col_description .renderedMarkdown'),
		})),
		Responses: [...b.querySelectorAll('table.responses-table > tbody > tr.response')].map(tr => ({
			Status: text(tr, '.response-col_status'),
			Description: text(tr, '.response-col_description__inner'),
			Headers: [...tr.querySelectorAll('table.headers > tbody > tr')].map(h => ({
				Name: h.cells[0].innerText.trim(), Description: h.cells[1].innerText.trim(),
			})),
		})),
		X: r.left + window.scrollX, Y: r.top + window.scrollY, Width: r.width, Height: r.height,
	};
})`

// TestReferencePageInABrowser loads the demo's API reference page (/docs/)
// in headless Chromium over a real connection and checks what a person
// sees there against the document the demo serves: every operation by its
// method, path and summary, open; its header parameters (Idempotency-Key,
// If-Match …) with their descriptions; every answer's status, the
// problem codes in its description, and its headers (Idempotent-Replayed,
// Retry-After …) with their descriptions. Every request the page makes
// goes to the demo (it renders with no network), and no script fails.
// Screenshots of the whole page and of POST /v1/payments are kept
// ([artifactsDir]; the paths are logged). Without Chromium the test
// skips, or fails under CI.
func TestReferencePageInABrowser(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath(chromiumPath); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%s is required under CI (apt-get install chromium): %v", chromiumPath, err)
		}
		t.Skipf("%s is not installed (apt-get install chromium): %v", chromiumPath, err)
	}
	e := newEnv(t, "sqlite:"+t.TempDir()+"/reference.db")
	doc := loadServedSpec(t, e.app.Handler())

	alloc, cancel := chromedp.NewExecAllocator(t.Context(), chromedp.ExecPath(chromiumPath),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU, chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 1000))
	defer cancel()
	ctx, cancel := chromedp.NewContext(alloc, chromedp.WithErrorf(t.Logf))
	defer cancel()
	ctx, cancel = context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()

	var mu sync.Mutex
	var requested, failures []string
	if err := chromedp.Listen(ctx, func(ev any) {
		mu.Lock()
		defer mu.Unlock()
		switch ev := ev.(type) {
		case *network.EventRequestWillBeSent:
			requested = append(requested, ev.Request.URL)
		case *runtime.EventExceptionThrown:
			what := ev.ExceptionDetails.Text
			if ex := ev.ExceptionDetails.Exception; ex != nil {
				what += " " + ex.Description
			}
			failures = append(failures, what)
		}
	}); err != nil {
		t.Fatalf("chromium: %v", err)
	}

	// The page has rendered when every operation is open with its
	// answers (Swagger UI fills each in after loading the document).
	operations := 0
	for _, item := range doc.Paths.Map() {
		operations += len(item.Operations())
	}
	ready := fmt.Sprintf(`(() => {
		const blocks = document.querySelectorAll('.opblock');
		return blocks.length === %d && [...blocks].every(b => b.querySelector('.responses-table .response') !== null);
	})()`, operations)
	res, err := chromedp.Run(ctx, chromedp.NavigateResponse(e.srv.URL+"/docs/"))
	if err != nil {
		t.Fatalf("chromium: GET /docs/: %v", err)
	}
	if res.Status != http.StatusOK {
		t.Fatalf("GET /docs/: %d %s", res.Status, res.MimeType)
	}
	if err := chromedp.Do(ctx, chromedp.Poll[chromedp.Void](ready, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		t.Fatalf("chromium: the page did not render its %d operations: %v", operations, err)
	}
	rendered, err := chromedp.Run(ctx, chromedp.Evaluate[[]renderedOperation](renderedOperations))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	keepScreenshots(ctx, t, rendered)

	seen := map[string]bool{}
	codes := map[string]bool{}
	for _, op := range rendered {
		// Swagger UI breaks long paths with zero-width spaces.
		key := op.Method + " " + strings.ReplaceAll(op.Path, "\u200b", "")
		method, path, _ := strings.Cut(key, " ")
		var described *openapi3.Operation
		if item := doc.Paths.Value(path); item != nil {
			described = item.GetOperation(method)
		}
		if described == nil || seen[key] {
			t.Fatalf("the page shows %q, which the document does not describe (or twice)", key)
		}
		seen[key] = true
		if !op.Visible || op.Summary != described.Summary {
			t.Fatalf("%s: the page shows the summary %q (visible %t), the document %q", key, op.Summary, op.Visible, described.Summary)
		}
		shown := map[string]string{}
		for _, p := range op.Params {
			if p.In == "(header)" {
				shown[p.Name] = p.Description
			}
		}
		for _, p := range described.Parameters {
			if p.Value.In != openapi3.ParameterInHeader {
				continue
			}
			if d, ok := shown[p.Value.Name]; !ok || d == "" || !strings.Contains(d, gist(p.Value.Description)) {
				t.Fatalf("%s: the page shows the header parameter %s as %q (shown: %v); the document says %q", key, p.Value.Name, d, ok, p.Value.Description)
			}
			delete(shown, p.Value.Name)
		}
		if len(shown) > 0 {
			t.Fatalf("%s: the page shows header parameters the document does not declare: %v", key, shown)
		}
		if len(op.Responses) != described.Responses.Len() {
			t.Fatalf("%s: the page shows %d answers, the document %d", key, len(op.Responses), described.Responses.Len())
		}
		for _, res := range op.Responses {
			resp := described.Responses.Value(res.Status)
			if resp == nil {
				t.Fatalf("%s: the page shows the answer %q, which the document does not declare", key, res.Status)
			}
			if mt := resp.Value.Content.Get("application/problem+json"); mt != nil {
				for _, c := range mt.Schema.Value.AllOf[1].Value.Properties["code"].Value.Enum {
					if !strings.Contains(res.Description, c.(string)) {
						t.Fatalf("%s %s: the page does not show the problem code %s: %q", key, res.Status, c, res.Description)
					}
					codes[c.(string)] = true
				}
			}
			if len(res.Headers) != len(resp.Value.Headers) {
				t.Fatalf("%s %s: the page shows the headers %+v, the document declares %d", key, res.Status, res.Headers, len(resp.Value.Headers))
			}
			for _, h := range res.Headers {
				declared := resp.Value.Headers[h.Name]
				if declared == nil || declared.Value.Description == "" || !strings.Contains(h.Description, gist(declared.Value.Description)) {
					t.Fatalf("%s %s: the page shows the header %s as %q, undescribed or not as the document describes it", key, res.Status, h.Name, h.Description)
				}
			}
		}
	}
	if len(seen) != operations {
		t.Fatalf("the page shows %d operations, the document describes %d", len(seen), operations)
	}
	// The retry contract itself, where a reader looks for it.
	for _, c := range []struct{ op, header string }{
		{"POST /v1/payments", "Idempotency-Key"}, {"POST /v1/transfers", "Idempotency-Key"},
	} {
		method, path, _ := strings.Cut(c.op, " ")
		if doc.Paths.Value(path).GetOperation(method).Parameters.GetByInAndName(openapi3.ParameterInHeader, c.header) == nil {
			t.Fatalf("%s: the document does not declare the %s header", c.op, c.header)
		}
	}
	for _, c := range []struct{ op, status string }{
		{"POST /v1/payments", "201"}, {"PUT /v1/orders/{id}", "201"}, {"POST /v1/transfers", "201"},
	} {
		method, path, _ := strings.Cut(c.op, " ")
		if doc.Paths.Value(path).GetOperation(method).Responses.Value(c.status).Value.Headers["Idempotent-Replayed"] == nil {
			t.Fatalf("%s %s: the document does not declare Idempotent-Replayed", c.op, c.status)
		}
	}
	for _, c := range []string{"idempotency_key_reuse", "request_in_progress", "outcome_pending", "idempotency_key_missing"} {
		if !codes[c] {
			t.Fatalf("the page does not show the problem code %s (shown: %v)", c, codes)
		}
	}

	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("the page's scripts failed: %v", failures)
	}
	own := 0
	for _, u := range requested {
		switch {
		case strings.HasPrefix(u, e.srv.URL+"/"):
			own++
		case strings.HasPrefix(u, "data:"), strings.HasPrefix(u, "blob:"):
		default:
			t.Fatalf("the page requested %s, which is not the demo's", u)
		}
	}
	if !slices.Contains(requested, e.srv.URL+"/docs/openapi.json") {
		t.Fatalf("the page did not load its document: requested %v", requested)
	}
	t.Logf("%d operations, %d problem codes shown; %d requests, all to the demo", len(seen), len(codes), own)
}

// gist is the start of a Markdown description as a browser shows it:
// its first 40 characters, without the backquotes of code.
func gist(markdown string) string {
	r := []rune(strings.ReplaceAll(markdown, "`", ""))
	return string(r[:min(len(r), 40)])
}

// keepScreenshots writes a screenshot of the whole page and one of the
// POST /v1/payments operation, the whole retry contract in one block (the
// key, the replay marker, the problem codes), to [artifactsDir].
func keepScreenshots(ctx context.Context, t *testing.T, rendered []renderedOperation) {
	t.Helper()
	page, err := chromedp.Run(ctx, chromedp.FullScreenshot(70))
	if err != nil {
		t.Fatalf("chromium: %v", err)
	}
	shots := map[string][]byte{"reference-page.jpeg": page}
	for _, op := range rendered {
		if op.Method == http.MethodPost && strings.ReplaceAll(op.Path, "\u200b", "") == "/v1/payments" {
			shot, err := chromedp.Call(ctx, cdppage.CaptureScreenshot, cdppage.CaptureScreenshotParams{
				Clip:                  &cdppage.Viewport{X: op.X, Y: op.Y, Width: op.Width, Height: op.Height, Scale: 1},
				CaptureBeyondViewport: new(true), FromSurface: new(true)})
			if err != nil {
				t.Fatalf("chromium: %v", err)
			}
			shots["reference-page-payments-create.png"] = shot.Data
		}
	}
	dir := artifactsDir(t)
	for _, name := range slices.Sorted(maps.Keys(shots)) {
		file := filepath.Join(dir, name)
		if err := os.WriteFile(file, shots[name], 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("a screenshot of the reference page: %s", file)
	}
}
