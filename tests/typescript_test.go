package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/wire"
)

// tsClientDir is the TypeScript client's npm package (client/typescript).
var tsClientDir = filepath.Join("..", "client", "typescript")

// envUpdateOpenAPI, set to 1, makes TestTypeScriptClientOpenAPIIsCurrent
// write the demo's document to client/typescript/openapi.json instead of
// comparing; `npm run generate` there sets it and then regenerates the
// types.
const envUpdateOpenAPI = "RETRYSAFE_UPDATE_OPENAPI"

// TestTypeScriptClientOpenAPIIsCurrent keeps client/typescript/openapi.json,
// which the client's types are generated from, equal to the document the
// demo serves: a change to the API that forgets the client fails here, and
// the client's own test then fails until its types are regenerated.
func TestTypeScriptClientOpenAPIIsCurrent(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "sqlite:"+t.TempDir()+"/openapi.db")
	var want bytes.Buffer
	if err := json.Indent(&want, servedSpec(t, e.app.Handler()), "", "  "); err != nil {
		t.Fatal(err)
	}
	want.WriteByte('\n')
	file := filepath.Join(tsClientDir, "openapi.json")
	if os.Getenv(envUpdateOpenAPI) == "1" {
		if err := os.WriteFile(file, want.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want.Bytes()) {
		t.Fatalf("client/typescript/openapi.json is not the document the demo serves: run `npm run generate` in client/typescript " +
			"(it writes the document and regenerates src/schema.ts from it)")
	}
}

// TestTypeScriptClientCodesMatchWire keeps the TypeScript client's table of
// generic problem codes (client/typescript/src/codes.ts), which its retry
// decision reads, equal to the wire contract's.
func TestTypeScriptClientCodesMatchWire(t *testing.T) {
	t.Parallel()
	src, err := os.ReadFile(filepath.Join(tsClientDir, "src", "codes.ts"))
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile(`(?m)^\s+([a-z0-9_]+): \{ status: (\d{3}), retryable: (true|false) \},$`)
	inTS := map[wire.Code]wire.CodeInfo{}
	for _, m := range row.FindAllStringSubmatch(string(src), -1) {
		status, _ := strconv.Atoi(m[2])
		inTS[wire.Code(m[1])] = wire.CodeInfo{Code: wire.Code(m[1]), Status: status, Retryable: m[3] == "true"}
	}
	for _, info := range wire.Generic() {
		got, ok := inTS[info.Code]
		if !ok || got.Status != info.Status || got.Retryable != info.Retryable {
			t.Errorf("codes.ts has %q as %+v; wire/code.go says status %d, retryable %t", info.Code, got, info.Status, info.Retryable)
		}
	}
	if len(inTS) != len(wire.Generic()) {
		t.Errorf("codes.ts lists %d codes, wire/code.go %d", len(inTS), len(wire.Generic()))
	}
}

// tsBuild builds the TypeScript client once per test binary.
var tsBuild struct {
	once sync.Once
	out  []byte
	err  error
}

// tsClient returns the directory of the TypeScript client, built, or
// skips the test without node, npm or the client's node_modules (`npm ci`
// in client/typescript); under CI, where .ci/run installs them, it fails.
func tsClient(t *testing.T) string {
	t.Helper()
	missing := ""
	for _, bin := range []string{"node", "npm"} {
		if _, err := exec.LookPath(bin); err != nil {
			missing = bin + " is not installed"
		}
	}
	if _, err := os.Stat(filepath.Join(tsClientDir, "node_modules")); missing == "" && err != nil {
		missing = "client/typescript/node_modules is missing (run npm ci there)"
	}
	if missing != "" {
		if os.Getenv("CI") != "" {
			t.Fatalf("the TypeScript client's tests need Node.js under CI: %s", missing)
		}
		t.Skipf("%s: the TypeScript client's tests need Node.js", missing)
	}
	tsBuild.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		cmd := exec.CommandContext(ctx, "npm", "run", "--silent", "build")
		cmd.Dir = tsClientDir
		tsBuild.out, tsBuild.err = cmd.CombinedOutput()
	})
	if tsBuild.err != nil {
		t.Fatalf("npm run build in client/typescript: %v\n%s", tsBuild.err, tsBuild.out)
	}
	return tsClientDir
}

// runNodeTest runs a test file of the client with node's test runner and
// env added to the environment; its output is logged when it fails.
func runNodeTest(t *testing.T, file string, env ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "--test", "--test-reporter=spec", file)
	cmd.Dir = tsClient(t)
	cmd.Env = append(os.Environ(), env...)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("node --test %s: %v\n%s", file, err, out)
	}
}

// tsScenario is one proxy of the demo that the client's demo test runs its
// operations through.
type tsScenario struct {
	Name         string `json:"name"`
	URL          string `json:"url"`
	Dropped      int    `json:"dropped"`
	SlowProvider bool   `json:"slowProvider"`
	proxy        *faultProxy
}

// tsOp is what the client's demo test reports of one logical operation.
type tsOp struct {
	Scenario string `json:"scenario"`
	Op       string `json:"op"`
	Method   string `json:"method"`
	Path     string `json:"path"`
	ID       string `json:"id"`
	Key      string `json:"key"`
	Replayed bool   `json:"replayed"`
	Attempts int    `json:"attempts"`
	Body     []byte `json:"body"` // base64 in the report
}

// operation names op for the fault proxy.
func (op tsOp) operation() string {
	switch op.Method {
	case http.MethodPost:
		return op.Key
	case http.MethodPatch:
		return "PATCH " + op.Path
	}
	return op.Path
}

// TestTypeScriptClientOnceThroughFaults runs the TypeScript client
// (client/typescript/test/demo.test.ts) against the demo on each database
// behind proxies that lose one or two answers of every write after the
// server committed, and with the sandbox provider losing its answer after
// the charge. Each logical create, replace, patch and payment has exactly
// one effect (one row, one charge, one event, the version moved once), and
// the client gets the answer the server first gave, byte for byte.
func TestTypeScriptClientOnceThroughFaults(t *testing.T) {
	t.Parallel()
	tsClient(t)
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn, losesAnswersQuickly)
		scenarios := []*tsScenario{
			{Name: "one answer dropped", Dropped: 1},
			{Name: "two answers dropped", Dropped: 2},
			{Name: "slow provider", SlowProvider: true},
		}
		byName := map[string]*tsScenario{}
		for _, sc := range scenarios {
			sc.proxy = newFaultProxy(t, ce.srv.Config.Handler)
			sc.proxy.setEveryOp(slices.Repeat([]clientFault{loseAnswer}, sc.Dropped)...)
			sc.URL = sc.proxy.URL
			byName[sc.Name] = sc
		}
		arg, _ := json.Marshal(scenarios)
		report := filepath.Join(t.TempDir(), "report.json")
		runNodeTest(t, "dist/test/demo.test.js", "RETRYSAFE_SCENARIOS="+string(arg), "RETRYSAFE_DIRECT="+ce.srv.URL,
			"RETRYSAFE_TOKEN="+tokenAcme, "RETRYSAFE_REPORT="+report)

		data, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		var ops []tsOp
		if err := json.Unmarshal(data, &ops); err != nil {
			t.Fatalf("report %s: %v", data, err)
		}
		if len(ops) != 3*4-3 { // four operations per scenario, no order operation with the slow provider
			t.Fatalf("the client reported %d operations, want 9: %s", len(ops), data)
		}
		var table strings.Builder
		fmt.Fprintf(&table, "\n| operation | scenario | attempts | replayed | rows | charges | events | answer byte-identical |\n|---|---|---|---|---|---|---|---|\n")
		payments := 0
		for _, op := range ops {
			sc := byName[op.Scenario]
			name := op.operation()
			if requests := sc.proxy.requests(name); requests != op.Attempts || (sc.Dropped > 0 && requests != sc.Dropped+1) {
				t.Fatalf("%s %s: the proxy saw %d requests, the client reports %d attempts (%d answers lost)", op.Op, op.Scenario, requests, op.Attempts, sc.Dropped)
			}
			if !bytes.Equal(op.Body, sc.proxy.originalAnswer(name)) {
				t.Fatalf("%s %s: the client got %s, the server first answered %s", op.Op, op.Scenario, op.Body, sc.proxy.originalAnswer(name))
			}
			var rows, charges, events int64
			switch op.Op {
			case "create", "replace", "patch":
				id := uuid.MustParse(op.ID)
				rows = ce.count("orders", "tenant_id = ? AND id = ?", "acme", id.String())
				wantVersion, eventType := int64(1), "order.created"
				if op.Op != "create" {
					wantVersion, eventType = 2, "order.replaced"
				}
				events = ce.count("outbox_events", "tenant_id = ? AND aggregate_type = 'order' AND aggregate_id = ? AND type = ?", "acme", id.String(), eventType)
				if v := ce.order("acme", id).Version; rows != 1 || events != 1 || v != wantVersion {
					t.Fatalf("%s %s: %d rows, %d %s events, version %d; want 1, 1, %d", op.Op, op.Scenario, rows, events, eventType, v, wantVersion)
				}
			case "pay":
				payments++
				var pay struct {
					ID string `json:"id"`
				}
				if err := json.Unmarshal(op.Body, &pay); err != nil {
					t.Fatal(err)
				}
				rows = ce.count("payments", "tenant_id = ? AND id = ?", "acme", pay.ID)
				charges = ce.count("sandbox_charges", "tenant_id = ? AND description = ?", "acme", "ts "+op.Key)
				events = ce.count("outbox_events", "tenant_id = ? AND aggregate_type = 'payment' AND aggregate_id = ? AND type = 'payment.succeeded'", "acme", pay.ID)
				if rows != 1 || charges != 1 || events != 1 {
					t.Fatalf("pay %s: %d payments, %d charges, %d payment.succeeded events; want one each", op.Scenario, rows, charges, events)
				}
			}
			fmt.Fprintf(&table, "| %s | %s | %d | %t | %d | %d | %d | yes |\n", op.Op, op.Scenario, op.Attempts, op.Replayed, rows, charges, events)
		}
		// One row per logical create: the operations' orders, and the ones the
		// replaces and patches started from, and no other.
		if n := ce.count("orders", "tenant_id = ?", "acme"); n != int64(len(ops)-payments) {
			t.Fatalf("%d orders, want %d", n, len(ops)-payments)
		}
		if charges, rows := len(ce.sandboxChargeIDs(t)), ce.count("payments", "tenant_id = ?", "acme"); charges != payments || rows != int64(payments) {
			t.Fatalf("%d sandbox charges, %d payments; want %d of each", charges, rows, payments)
		}
		t.Log(table.String())
	})
}

// TestTypeScriptClientInBrowser runs the client in headless Chromium
// (client/typescript/test/browser.test.ts): a page served from the proxy's
// origin creates an order while the proxy loses every answer, is reloaded
// in the middle of its retries, and ends with one order, created once,
// whose answer is the one the server first gave.
func TestTypeScriptClientInBrowser(t *testing.T) {
	t.Parallel()
	dir := tsClient(t)
	chromium := os.Getenv("RETRYSAFE_CHROMIUM")
	if chromium == "" {
		chromium = "/usr/bin/chromium"
	}
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("the browser test needs Chromium under CI: %v", err)
		}
		t.Skipf("Chromium is not installed (%v): apt-get install chromium, or set RETRYSAFE_CHROMIUM", err)
	}
	testdb.Run(t, func(t *testing.T, dsn string) {
		ce := clientSetup(t, dsn)
		mux := http.NewServeMux()
		proxy := newFaultProxy(t, mux)
		proxy.setEveryOp(slices.Repeat([]clientFault{loseAnswer}, 1000)...)
		mux.HandleFunc("GET /client-test/{$}", func(w http.ResponseWriter, r *http.Request) {
			http.ServeFile(w, r, filepath.Join(dir, "test", "browser", "index.html"))
		})
		mux.HandleFunc("GET /client-test/page.js", func(w http.ResponseWriter, r *http.Request) {
			http.ServeFile(w, r, filepath.Join(dir, "dist", "browser", "page.js"))
		})
		mux.HandleFunc("POST /client-test/heal", func(w http.ResponseWriter, r *http.Request) {
			proxy.setEveryOp()
			w.WriteHeader(http.StatusNoContent)
		})
		mux.Handle("/", ce.srv.Config.Handler)

		report := filepath.Join(t.TempDir(), "report.json")
		runNodeTest(t, "dist/test/browser.test.js", "RETRYSAFE_BROWSER="+proxy.URL, "RETRYSAFE_CHROMIUM="+chromium,
			"RETRYSAFE_TOKEN="+tokenAcme, "RETRYSAFE_REPORT="+report)
		data, err := os.ReadFile(report)
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			ID       string `json:"id"`
			Attempts int    `json:"attempts"`
			Body     []byte `json:"body"`
		}
		if err := json.Unmarshal(data, &got); err != nil {
			t.Fatalf("report %s: %v", data, err)
		}
		id := uuid.MustParse(got.ID)
		if original := proxy.originalAnswer(orderPath(id)); !bytes.Equal(got.Body, original) {
			t.Fatalf("the page got %s, the server first answered %s", got.Body, original)
		}
		if rows, events := ce.count("orders", "tenant_id = ?", "acme"), ce.events("acme", id); rows != 1 || events != 1 {
			t.Fatalf("%d orders, %d order.created events after %d requests; want exactly one of each", rows, events, proxy.requests(orderPath(id)))
		}
		t.Logf("browser: order %s created once after %d requests (%d by the reloaded page), answer byte-identical",
			id, proxy.requests(orderPath(id)), got.Attempts)
	})
}
