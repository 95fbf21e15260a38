package tests

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/hashicorp/go-retryablehttp"

	"github.com/retrysafe/retrysafe/client"
	"github.com/retrysafe/retrysafe/client/retryable"
	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework/retrysafetest"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/transfers"
)

// fakePending answers 409 outcome_pending with Retry-After: 1 without
// forwarding.
const fakePending clientFault = 100

// faultProxy is the lost-answer proxy of package retrysafetest in front
// of a server of the demo handler, for clients that are not Go (curl,
// Python, Node, a browser) or that bring their own transport
// (go-retryablehttp): the faults happen on a real connection. Each logical
// operation (its Idempotency-Key, its PUT path, or "PATCH " and its path)
// gets a plan (its own, or the one for every operation); request n of it
// undergoes plan[n]. loseAnswer lets the demo commit, then closes the
// connection without a byte of answer; the fakes answer in the demo's
// place. The proxy keeps the first real 2xx answer per operation and
// counts the requests of each.
type faultProxy struct {
	// URL is the proxy's base URL.
	URL string

	mu       sync.Mutex
	plans    map[string][]clientFault
	everyOp  []clientFault // the plan of an operation without one of its own
	seen     map[string]int
	original map[string][]byte
	losing   map[*http.Request]bool // forwarded requests whose answer is to be lost
}

func newFaultProxy(t *testing.T, next http.Handler) *faultProxy {
	t.Helper()
	srv := httptest.NewServer(next)
	t.Cleanup(srv.Close)
	p := &faultProxy{plans: map[string][]clientFault{}, seen: map[string]int{}, original: map[string][]byte{},
		losing: map[*http.Request]bool{}}
	proxy, err := retrysafetest.StartProxy(strings.TrimPrefix(srv.URL, "http://"),
		retrysafetest.ProxyConfig{StandInFunc: p.standIn, DropAnswerFunc: p.drop})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proxy.Close)
	p.URL = "http://" + proxy.Addr()
	return p
}

func (p *faultProxy) setPlan(op string, plan ...clientFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.plans[op] = plan
}

// setEveryOp sets the plan of every operation that has none of its own:
// its request n (counted from its first) undergoes plan[n]. nil lets
// every request through.
func (p *faultProxy) setEveryOp(plan ...clientFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.everyOp = plan
}

func (p *faultProxy) requests(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.seen[op]
}

func (p *faultProxy) originalAnswer(op string) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.original[op]
}

// operation names the logical operation of r.
func (p *faultProxy) operation(r *http.Request) string {
	switch r.Method {
	case http.MethodPut:
		return r.URL.Path
	case http.MethodPatch:
		return "PATCH " + r.URL.Path
	}
	return r.Header.Get("Idempotency-Key")
}

// standIn counts r and applies its fault: a fake answer in the demo's
// place, or a mark that its answer is to be lost.
func (p *faultProxy) standIn(r *http.Request) *http.Response {
	op := p.operation(r)
	p.mu.Lock()
	defer p.mu.Unlock()
	n := p.seen[op]
	p.seen[op]++
	plan, ok := p.plans[op]
	if !ok {
		plan = p.everyOp
	}
	fault := passThrough
	if op != "" && n < len(plan) {
		fault = plan[n]
	}
	switch fault {
	case fake503:
		return clientSyntheticProblem(r, http.StatusServiceUnavailable, client.CodeUnavailable, "1")
	case fakeInProgress:
		return clientSyntheticProblem(r, http.StatusConflict, client.CodeRequestInProgress, "1")
	case fakePending:
		return clientSyntheticProblem(r, http.StatusConflict, client.CodeOutcomePending, "1")
	case loseAnswer:
		p.losing[r] = true
	}
	return nil
}

// drop keeps the first 2xx answer of each operation and loses the answers
// standIn marked.
func (p *faultProxy) drop(r *http.Request, answer []byte) bool {
	op := p.operation(r)
	res, body, err := retrysafetest.ReadAnswer(answer)
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, seen := p.original[op]; err == nil && op != "" && res.StatusCode/100 == 2 && !seen {
		p.original[op] = body
	}
	lose := p.losing[r]
	delete(p.losing, r)
	return lose
}

// recipeSetup is the demo app on dsn behind a fault proxy.
func recipeSetup(t *testing.T, dsn string, cfg ...func(*app.Config)) (*clientEnv, *faultProxy) {
	t.Helper()
	ce := clientSetup(t, dsn, cfg...)
	return ce, newFaultProxy(t, ce.srv.Config.Handler)
}

// retryableClient is go-retryablehttp with the shipped policy and short
// waits where the server names none.
func retryableClient() *retryablehttp.Client {
	rc := retryable.NewClient()
	rc.RetryWaitMin, rc.RetryWaitMax, rc.RetryMax = 5*time.Millisecond, 50*time.Millisecond, 6
	return rc
}

// retryableDo sends one logical operation through rc and reads the answer.
func retryableDo(t *testing.T, rc *retryablehttp.Client, method, url, key string, body []byte, headers ...string) response {
	t.Helper()
	req, err := retryablehttp.NewRequestWithContext(t.Context(), method, url, body)
	if err != nil {
		t.Fatalf("new request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenAcme)
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	res, err := rc.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer res.Body.Close()
	b, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return response{Status: res.StatusCode, Header: res.Header, Body: b}
}

// recipePlans are the fault sequences of the recipe tests: every retryable
// kind of answer, and lost answers after the server committed.
var recipePlans = [][]clientFault{
	{loseAnswer},
	{fake503, loseAnswer},
	{fakeInProgress, loseAnswer},
	{fakePending, loseAnswer, loseAnswer},
	{},
}

func TestRetryableHTTPPaymentsOnceThroughFaults(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn)
		ce.skipWithoutPayments(t)
		rc := retryableClient()
		charges := map[string]bool{}
		for i, plan := range recipePlans {
			key := fmt.Sprintf("rh-payment-%d", i)
			proxy.setPlan(key, plan...)
			body := fmt.Appendf(nil, `{"amount":%d,"currency":"usd","customer":"cus_8812"}`, 1000+i)
			r := retryableDo(t, rc, http.MethodPost, proxy.URL+"/v1/payments", key, body)
			wantStatus(t, r, http.StatusCreated)
			if !bytes.Equal(r.Body, proxy.originalAnswer(key)) {
				t.Fatalf("op %d: got %s, want the original answer %s", i, r.Body, proxy.originalAnswer(key))
			}
			if got, want := proxy.requests(key), len(plan)+1; got != want {
				t.Fatalf("op %d: %d requests, want %d (one per fault, then the answer)", i, got, want)
			}
			charges[providerChargeID(t, r.Body)] = true
		}
		if got := ce.sandboxChargeIDs(t); len(got) != len(recipePlans) || len(charges) != len(recipePlans) {
			t.Fatalf("sandbox charges %v, distinct answers %d: want one charge per logical payment (%d)", got, len(charges), len(recipePlans))
		}
	})
}

func TestRetryableHTTPOrdersOnceThroughFaults(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn)
		rc := retryableClient()
		for i, plan := range recipePlans {
			id := uuid.New()
			proxy.setPlan(orderPath(id), plan...)
			r := retryableDo(t, rc, http.MethodPut, proxy.URL+orderPath(id), "", orderBody(i+1, "5.00"), "If-None-Match", "*")
			wantStatus(t, r, http.StatusCreated)
			if !bytes.Equal(r.Body, proxy.originalAnswer(orderPath(id))) || r.Header.Get("Location") != orderPath(id) {
				t.Fatalf("op %d: got %s (Location %q), want the original answer", i, r.Body, r.Header.Get("Location"))
			}
			if n := ce.events("acme", id); n != 1 {
				t.Fatalf("op %d: %d order.created events, want 1", i, n)
			}
		}
		if n := ce.count("orders", "tenant_id = ?", "acme"); n != int64(len(recipePlans)) {
			t.Fatalf("%d orders, want %d", n, len(recipePlans))
		}
	})
}

// TestRetryableHTTPFinalAnswersAtOnce: a final 409 and a 422 come back
// after one request, with their problem bodies, and nothing is executed
// twice.
func TestRetryableHTTPFinalAnswersAtOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn)
		rc := retryableClient()
		url := proxy.URL + "/v1/transfers"
		wantStatus(t, retryableDo(t, rc, http.MethodPost, url, "rh-eur", transferBody("acc_a", "acc_b", 100, "EUR")), http.StatusCreated)

		mismatch := retryableDo(t, rc, http.MethodPost, url, "rh-usd", transferBody("acc_a", "acc_b", 100, "USD"))
		wantStatus(t, mismatch, http.StatusConflict)
		if code := mismatch.Code(t); code != string(transfers.CodeCurrencyMismatch) || mismatch.Header.Get("Retry-After") != "" {
			t.Fatalf("final 409: code %q, Retry-After %q", code, mismatch.Header.Get("Retry-After"))
		}
		reuse := retryableDo(t, rc, http.MethodPost, url, "rh-eur", transferBody("acc_a", "acc_b", 999, "EUR"))
		wantStatus(t, reuse, http.StatusUnprocessableEntity)
		if code := reuse.Code(t); code != client.CodeIdempotencyKeyReuse {
			t.Fatalf("422: code %q", code)
		}
		if proxy.requests("rh-usd") != 1 || proxy.requests("rh-eur") != 2 {
			t.Fatalf("requests: rh-usd %d, rh-eur %d; want 1 and 2 (no retry of a final answer)", proxy.requests("rh-usd"), proxy.requests("rh-eur"))
		}
		if n := ce.count("transfers", "tenant_id = ?", "acme"); n != 1 {
			t.Fatalf("%d transfers, want 1", n)
		}
		ce.wantBalance(tokenAcme, "acc_b", 100)
	})
}

// TestRetryableHTTPOutcomePending: the real outcome_pending of a charge
// whose answer the provider lost is retried after its Retry-After, and the
// caller gets the one charge.
func TestRetryableHTTPOutcomePending(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn, losesAnswersQuickly)
		ce.skipWithoutPayments(t)
		start := time.Now()
		r := retryableDo(t, retryableClient(), http.MethodPost, proxy.URL+"/v1/payments", "rh-pending",
			[]byte(`{"amount":4200,"currency":"usd","customer":"cus_8812","payment_method":"pm_card_timeout_after_charge"}`))
		wantStatus(t, r, http.StatusCreated)
		if proxy.requests("rh-pending") < 2 || time.Since(start) < time.Second {
			t.Fatalf("%d requests in %v: want a retry after the 409's Retry-After", proxy.requests("rh-pending"), time.Since(start))
		}
		if charges := ce.sandboxChargeIDs(t); len(charges) != 1 || charges[0] != providerChargeID(t, r.Body) {
			t.Fatalf("sandbox charges %v: want the one charge of %s", charges, r.Body)
		}
	})
}

// TestRetryableHTTPExhaustedKeepsLastAnswer: when the retries run out on a
// retryable answer, the caller gets that answer with its problem body, not
// go-retryablehttp's bare "giving up" error.
func TestRetryableHTTPExhaustedKeepsLastAnswer(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn)
		rc := retryableClient()
		rc.RetryMax = 1
		rc.Backoff = func(time.Duration, time.Duration, int, *http.Response) time.Duration { return 0 }
		proxy.setPlan("rh-exhausted", fake503, fake503, fake503)
		r := retryableDo(t, rc, http.MethodPost, proxy.URL+"/v1/transfers", "rh-exhausted", transferBody("acc_a", "acc_b", 1, "EUR"))
		wantStatus(t, r, http.StatusServiceUnavailable)
		if code := r.Code(t); code != client.CodeUnavailable || r.Header.Get("Retry-After") != "1" {
			t.Fatalf("code %q, Retry-After %q", code, r.Header.Get("Retry-After"))
		}
		if n := ce.count("transfers", ""); n != 0 || proxy.requests("rh-exhausted") != 2 {
			t.Fatalf("%d transfers after %d requests, want 0 after 2", n, proxy.requests("rh-exhausted"))
		}
	})
}

// problemCode decodes the code of a problem body.
func problemCode(body []byte) string {
	var p struct {
		Code string `json:"code"`
	}
	_ = json.Unmarshal(body, &p)
	return p.Code
}

// docBlock returns the fenced code block of language lang in the document
// file (relative to the repository root) that contains marker: the recipe
// a reader copies is the one that runs.
func docBlock(t *testing.T, file, lang, marker string) string {
	t.Helper()
	doc, err := os.ReadFile(filepath.Join("..", file))
	if err != nil {
		t.Fatalf("read %s: %v", file, err)
	}
	for _, part := range strings.Split(string(doc), "```"+lang+"\n")[1:] {
		block, _, ok := strings.Cut(part, "\n```")
		if ok && strings.Contains(block, marker) {
			return block + "\n"
		}
	}
	t.Fatalf("%s has no %s block with %q", file, lang, marker)
	return ""
}

// recipeOp is one logical operation a recipe runs, and what must come of it:
// a POST with its key, or a merge patch (Method PATCH) of Path.
type recipeOp struct {
	Method string          `json:"method,omitempty"`
	Path   string          `json:"path"`
	Key    string          `json:"key"`
	Body   json.RawMessage `json:"body"`
	plan   []clientFault
	status int
	code   string
}

// operation names op for the fault proxy.
func (op recipeOp) operation() string {
	if op.Method == http.MethodPatch {
		return "PATCH " + op.Path
	}
	return op.Key
}

func recipeOps(prefix string) []recipeOp {
	ops := make([]recipeOp, 0, len(recipePlans)+3)
	for i, plan := range recipePlans {
		ops = append(ops, recipeOp{Path: "/v1/payments", Key: fmt.Sprintf("%s-pay-%d", prefix, i), plan: plan, status: http.StatusCreated,
			Body: fmt.Appendf(nil, `{"amount":%d,"currency":"usd","customer":"cus_8812"}`, 2000+i)})
	}
	return append(ops,
		recipeOp{Path: "/v1/transfers", Key: prefix + "-eur", Body: transferBody("acc_a", "acc_b", 100, "EUR"),
			plan: []clientFault{fakeInProgress, loseAnswer}, status: http.StatusCreated},
		recipeOp{Path: "/v1/transfers", Key: prefix + "-usd", Body: transferBody("acc_a", "acc_b", 100, "USD"),
			status: http.StatusConflict, code: string(transfers.CodeCurrencyMismatch)},
		recipeOp{Path: "/v1/transfers", Key: prefix + "-eur", Body: transferBody("acc_a", "acc_b", 999, "EUR"),
			status: http.StatusUnprocessableEntity, code: client.CodeIdempotencyKeyReuse},
	)
}

// wantRecipeOutcome checks what one operation of a recipe got, then, once
// all ran, that each had exactly one effect.
func wantRecipeOutcome(t *testing.T, proxy *faultProxy, op recipeOp, status int, body []byte, requestsBefore int) {
	t.Helper()
	name := op.operation()
	if status != op.status {
		t.Fatalf("%s: status %d, want %d; body %s", name, status, op.status, body)
	}
	requests := proxy.requests(name) - requestsBefore
	if op.code != "" {
		if problemCode(body) != op.code || requests != 1 {
			t.Fatalf("%s: code %q after %d requests, want the final %s at once with its body %s", name, problemCode(body), requests, op.code, body)
		}
		return
	}
	if !bytes.Equal(body, proxy.originalAnswer(name)) || requests != len(op.plan)+1 {
		t.Fatalf("%s: %s after %d requests; want the original answer %s after %d", name, body, requests, proxy.originalAnswer(name), len(op.plan)+1)
	}
}

func wantOneEffectEach(t *testing.T, ce *clientEnv) {
	t.Helper()
	if charges := ce.sandboxChargeIDs(t); len(charges) != len(recipePlans) {
		t.Fatalf("%d sandbox charges, want %d (one per logical payment)", len(charges), len(recipePlans))
	}
	if n := ce.count("transfers", "tenant_id = ?", "acme"); n != 1 {
		t.Fatalf("%d transfers, want 1", n)
	}
	ce.wantBalance(tokenAcme, "acc_b", 100)
}

// pythonDriver runs one recipeOp with the recipe's session: a POST through
// post_once, a PATCH as the recipe's closing comment sends it.
const pythonDriver = `
import json, os, sys
session = retrysafe_session(os.environ["RETRYSAFE_TOKEN"])
op = json.loads(sys.argv[1])
url = os.environ["RETRYSAFE_BASE"] + op["path"]
if op.get("method") == "PATCH":
    r = session.patch(url, json=op["body"], headers={"Content-Type": "application/merge-patch+json"}, timeout=10)
else:
    r = post_once(session, url, op["body"], key=op["key"])
print(json.dumps({"status": r.status_code, "body": r.text}))
`

// pythonRecipe writes the Python recipe of docs/clients.md and its driver
// to a script, or skips the test without python3 and requests.
func pythonRecipe(t *testing.T) string {
	t.Helper()
	if err := exec.Command("python3", "-c", "import requests").Run(); err != nil {
		t.Skipf("python3 with requests is not available (%v): install python3-requests to run the Python recipe", err)
	}
	script := filepath.Join(t.TempDir(), "recipe.py")
	if err := os.WriteFile(script, []byte(docBlock(t, "docs/clients.md", "python", "class RetrysafeRetry")+pythonDriver), 0o600); err != nil {
		t.Fatal(err)
	}
	return script
}

// runPythonRecipe sets op's fault plan, runs it with the script of
// [pythonRecipe] through the proxy and checks its outcome.
func runPythonRecipe(t *testing.T, script string, proxy *faultProxy, op recipeOp) {
	t.Helper()
	proxy.setPlan(op.operation(), op.plan...)
	before := proxy.requests(op.operation())
	arg, _ := json.Marshal(op)
	cmd := exec.CommandContext(t.Context(), "python3", script, string(arg))
	cmd.Env = append(os.Environ(), "RETRYSAFE_BASE="+proxy.URL, "RETRYSAFE_TOKEN="+tokenAcme)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s: python: %v: %s", op.operation(), err, exitStderr(err))
	}
	var got struct {
		Status int    `json:"status"`
		Body   string `json:"body"`
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("%s: python printed %s: %v", op.operation(), out, err)
	}
	wantRecipeOutcome(t, proxy, op, got.Status, []byte(got.Body), before)
}

// TestRecipePythonRequests runs the Python recipe of docs/clients.md against the
// demo behind the fault proxy.
func TestRecipePythonRequests(t *testing.T) {
	t.Parallel()
	script := pythonRecipe(t)
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn)
		ce.skipWithoutPayments(t)
		for _, op := range recipeOps("py") {
			runPythonRecipe(t, script, proxy, op)
		}
		wantOneEffectEach(t, ce)
	})
}

// TestRecipePythonRequestsPatch: the Python recipe retries a merge patch
// whose answer was lost after the server applied it, and the retry
// converges: the answer the server first gave, byte for byte, the version
// moved once and one order.replaced event.
func TestRecipePythonRequestsPatch(t *testing.T) {
	t.Parallel()
	script := pythonRecipe(t)
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn)
		for i, plan := range [][]clientFault{{loseAnswer}, {fake503, loseAnswer, loseAnswer}} {
			id, _ := createOrder(t, ce.env)
			note := fmt.Sprintf("ring %d times", i+2)
			runPythonRecipe(t, script, proxy, recipeOp{Method: http.MethodPatch, Path: orderPath(id),
				Body: fmt.Appendf(nil, `{"note":%q}`, note), plan: plan, status: http.StatusOK})
			if v, n := ce.order("acme", id).Version, replacedEvents(t, ce.env, id); v != 2 || n != 1 {
				t.Fatalf("plan %d: version %d, %d order.replaced events; want 2 and 1 (the patch applied once)", i, v, n)
			}
			if c := ce.orderColumns("acme", id); c.Note != note {
				t.Fatalf("plan %d: note %q, want %q", i, c.Note, note)
			}
		}
	})
}

// skipWithoutCurl skips a test that runs a shell block of the
// documentation when curl or bash is missing.
func skipWithoutCurl(t *testing.T, what string) {
	t.Helper()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Skipf("curl is not installed: install curl to run %s", what)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		t.Skip("bash is not installed")
	}
}

// TestRecipeCurl runs the curl recipe of docs/clients.md against the demo
// behind the fault proxy.
func TestRecipeCurl(t *testing.T) {
	t.Parallel()
	skipWithoutCurl(t, "the curl recipe")
	recipe := docBlock(t, "docs/clients.md", "sh", "retrysafe_post()")
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce, proxy := recipeSetup(t, dsn)
		ce.skipWithoutPayments(t)
		dir := t.TempDir()
		for _, op := range recipeOps("curl") {
			proxy.setPlan(op.Key, op.plan...)
			before := proxy.requests(op.Key)
			cmd := exec.CommandContext(t.Context(), "bash", "-c", recipe+`retrysafe_post "$1" "$2" "$3"`, "recipe",
				proxy.URL+op.Path, op.Key, string(op.Body))
			cmd.Dir = dir
			cmd.Env = append(os.Environ(), "TOKEN="+tokenAcme)
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("%s: bash: %v: %s", op.Key, err, exitStderr(err))
			}
			status, err := strconv.Atoi(strings.TrimSpace(string(out)))
			if err != nil {
				t.Fatalf("%s: the recipe printed %q", op.Key, out)
			}
			body, err := os.ReadFile(filepath.Join(dir, "response.json"))
			if err != nil {
				t.Fatal(err)
			}
			wantRecipeOutcome(t, proxy, op, status, body, before)
		}
		wantOneEffectEach(t, ce)
	})
}

func exitStderr(err error) string {
	if ee, ok := err.(*exec.ExitError); ok {
		return string(ee.Stderr)
	}
	return ""
}

// TestREADMEWalkThrough runs the README's walk through the demo, as
// written but for the address, with bash and curl: each answer is the one
// its comment names, and the order it made is the one row it describes.
func TestREADMEWalkThrough(t *testing.T) {
	t.Parallel()
	skipWithoutCurl(t, "the README's walk-through")
	walk := docBlock(t, "README.md", "sh", "# Create: 201")
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		script := strings.ReplaceAll(walk, "localhost:8080", strings.TrimPrefix(e.srv.URL, "http://"))
		cmd := exec.CommandContext(t.Context(), "bash", "-euo", "pipefail", "-c", script+`echo; echo "id $ID"`)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("bash: %v: %s", err, exitStderr(err))
		}
		// A body ends without a newline, so the next status line follows it.
		var statuses []int
		for _, m := range regexp.MustCompile(`HTTP/1\.1 (\d{3}) `).FindAllStringSubmatch(string(out), -1) {
			status, _ := strconv.Atoi(m[1])
			statuses = append(statuses, status)
		}
		_, id, _ := strings.Cut(string(out), "\nid ")
		id = strings.TrimSpace(id)
		want := []int{http.StatusCreated, http.StatusCreated, http.StatusOK, http.StatusOK, http.StatusOK, http.StatusNoContent, http.StatusNotFound}
		if fmt.Sprint(statuses) != fmt.Sprint(want) {
			t.Fatalf("answers %v, want %v:\n%s", statuses, want, out)
		}
		if _, err := uuid.Parse(id); err != nil {
			t.Fatalf("the walk-through's ID %q: %v", id, err)
		}
		if n := e.count("orders", ""); n != 1 {
			t.Fatalf("%d orders, want the one the walk-through made", n)
		}
		if n := e.count("orders", "tenant_id = ? AND id = ? AND version = 4 AND note = ? AND deleted_at IS NOT NULL", "acme", strings.ToLower(id), "ring twice"); n != 1 {
			t.Fatalf("order %s is not deleted at version 4 (create, replace, patch, delete) with its note", id)
		}
	})
}
