package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
)

// The generator and the runtime its clients import, from the Go module
// proxy: they stay out of the framework's go.mod.
const (
	oapiCodegenModule  = "github.com/oapi-codegen/oapi-codegen/v2"
	oapiCodegenVersion = "v2.8.2"
	oapiCodegenRuntime = "github.com/oapi-codegen/runtime v1.9.0"
)

// TestOAPICodegenClient generates a Go client with oapi-codegen, which
// reads OpenAPI 3.0 only, from the demo's /openapi-3.0.json, compiles it
// in a module of its own (a temporary directory) with
// testdata/oapiclient/main.go, and runs that program against the demo: it
// creates an order with the client's PUT, sends the PUT again as a retry
// would, and reads the order back. The order exists once, with what the
// client sent, and the retry is the replayed answer; every exchange passes
// the demo's OpenAPI checker.
//
// It needs the Go module proxy, or a module cache that has the generator
// and the runtime already: with a cold cache it downloads about 110 MB
// and compiles the generator (a minute or two on two cores), with a warm
// one it takes seconds. Without the proxy it skips, or fails under CI.
func TestOAPICodegenClient(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go is not on PATH")
	}
	e := newEnv(t, "sqlite:"+t.TempDir()+"/codegen.db")
	res := e.do(http.MethodGet, "/openapi-3.0.json", "", nil)
	wantStatus(t, res, http.StatusOK)

	dir := t.TempDir()
	program, err := os.ReadFile(filepath.Join("testdata", "oapiclient", "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string][]byte{
		"openapi-3.0.json": res.Body,
		"main.go":          program,
		"go.mod":           []byte("module oapiclient\n\ngo 1.25\n\nrequire " + oapiCodegenRuntime + "\n"),
	} {
		if err := os.WriteFile(filepath.Join(dir, name), content, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Minute)
	defer cancel()
	goCmd := func(args ...string) []byte {
		t.Helper()
		start := time.Now()
		cmd := exec.CommandContext(ctx, "go", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GOWORK=off")
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		if err := cmd.Run(); err != nil {
			t.Fatalf("go %v: %v\n%s", args, err, stderr.Bytes())
		}
		t.Logf("go %v: %s", args[:min(len(args), 2)], time.Since(start).Round(time.Millisecond))
		return stdout.Bytes()
	}
	if out, err := exec.CommandContext(ctx, "go", "mod", "download", "-json", oapiCodegenModule+"@"+oapiCodegenVersion).CombinedOutput(); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("oapi-codegen from the Go module proxy: %v\n%s", err, out)
		}
		t.Skipf("oapi-codegen is not in the module cache and the Go module proxy does not answer (%v): %s", err, out)
	}
	goCmd("run", oapiCodegenModule+"/cmd/oapi-codegen@"+oapiCodegenVersion,
		"-generate", "types,client", "-package", "main", "-o", "client.gen.go", "openapi-3.0.json")
	goCmd("mod", "tidy")

	id := uuid.New()
	out := goCmd("run", ".", e.srv.URL, tokenAcme, id.String())
	type answer struct {
		Call, ID, Total, Location, Replayed string
		Status                              int
		Version                             int64
	}
	var answers []answer
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var a answer
		if err := dec.Decode(&a); err != nil {
			t.Fatalf("the client's output %q: %v", out, err)
		}
		answers = append(answers, a)
	}
	want := []answer{
		{Call: "put", Status: http.StatusCreated, ID: id.String(), Total: "19.00", Version: 1, Location: orderPath(id)},
		{Call: "put again", Status: http.StatusCreated, ID: id.String(), Total: "19.00", Version: 1, Location: orderPath(id), Replayed: "true"},
		{Call: "get", Status: http.StatusOK, ID: id.String(), Total: "19.00", Version: 1},
	}
	if len(answers) != len(want) {
		t.Fatalf("the client printed %q, want %d answers", out, len(want))
	}
	for i := range want {
		if answers[i] != want[i] {
			t.Fatalf("answer %d: the generated client parsed %+v, want %+v", i, answers[i], want[i])
		}
	}
	if n := e.count("orders", "tenant_id = ? AND id = ?", "acme", id.String()); n != 1 {
		t.Fatalf("%d orders %s, want 1", n, id)
	}
	if n := e.count("orders", ""); n != 1 {
		t.Fatalf("%d orders in all, want 1", n)
	}
	c := e.orderColumns("acme", id)
	if c.Customer != "cus_oapi" || c.Currency != "EUR" || c.TotalCents != 1900 || len(c.Items) != 1 ||
		c.Items[0] != (orderItemRow{Position: 0, SKU: "sku_1", Quantity: 2, UnitPriceCents: 950}) {
		t.Fatalf("the order the client created: %+v", c)
	}
}
