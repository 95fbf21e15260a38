package redocly

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"
)

// Problem is one finding of the linter.
type Problem struct {
	RuleID   string `json:"ruleId"`
	Severity string `json:"severity"`
	Message  string `json:"message"`
	Location []struct {
		Pointer string `json:"pointer"`
	} `json:"location"`
}

// Lint writes doc to a file and runs `redocly lint --extends recommended`
// over it. Every error fails tb, and so does every warning whose rule is
// not in allowedWarnings; allowed warnings are logged.
func Lint(tb testing.TB, doc []byte, allowedWarnings ...string) {
	tb.Helper()
	bin, err := exec.LookPath("redocly")
	if err != nil {
		if os.Getenv("CI") != "" {
			tb.Fatal("redocly: the redocly binary is required under CI (npm install -g @redocly/cli)")
		}
		tb.Skip("redocly: the redocly binary is not on PATH; npm install -g @redocly/cli to lint the document")
	}
	dir := tb.TempDir()
	file := filepath.Join(dir, "openapi.json")
	if err := os.WriteFile(file, doc, 0o600); err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "lint", "--extends", "recommended", "--format", "json", file)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "REDOCLY_TELEMETRY=off", "REDOCLY_SUPPRESS_UPDATE_NOTICE=true", "NO_COLOR=1")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	runErr := cmd.Run()
	var report struct {
		Totals struct {
			Errors   int `json:"errors"`
			Warnings int `json:"warnings"`
		} `json:"totals"`
		Problems []Problem `json:"problems"`
	}
	if err := json.Unmarshal(stdout.Bytes(), &report); err != nil {
		tb.Fatalf("redocly lint: %v; no report (%v): %s %s", runErr, err, stdout.Bytes(), stderr.Bytes())
	}
	for _, p := range report.Problems {
		where := ""
		if len(p.Location) > 0 {
			where = p.Location[0].Pointer
		}
		if p.Severity == "warn" && slices.Contains(allowedWarnings, p.RuleID) {
			tb.Logf("redocly lint: allowed warning %s at %s: %s", p.RuleID, where, p.Message)
			continue
		}
		tb.Errorf("redocly lint: %s %s at %s: %s", p.Severity, p.RuleID, where, p.Message)
	}
	if runErr != nil && report.Totals.Errors == 0 {
		tb.Fatalf("redocly lint failed without reporting an error: %v: %s", runErr, stderr.Bytes())
	}
}
