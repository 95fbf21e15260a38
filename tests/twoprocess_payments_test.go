package tests

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/testdb"
)

const listeningPrefix = "retrysafe demo listening on "

// buildDemo compiles ./cmd/demo into a temporary directory.
func buildDemo(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("go", "build", "-o", bin, "github.com/retrysafe/retrysafe/cmd/demo")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/demo: %v\n%s", err, out)
	}
	return bin
}

// startDemo starts the demo binary on a random port against dsn and
// returns its base URL once it prints that it is listening. The process is
// killed and reaped when the test ends.
func startDemo(t *testing.T, bin, dsn string) string {
	t.Helper()
	cmd := exec.Command(bin, "-addr", "127.0.0.1:0", "-db", dsn)
	cmd.Env = append(cmd.Environ(), "DATABASE_URL=", "DEMO_API_TOKENS=")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("start demo: %v", err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), listeningPrefix); ok {
				ready <- addr
				break
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case url := <-ready:
		return strings.TrimSpace(url)
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		t.Fatalf("demo did not report its address within 30s; stderr:\n%s", stderr.String())
		return ""
	}
}

// TestTwoProcessesChargeOnce runs two demo processes on one PostgreSQL
// schema and splits concurrent same-key payments between them: the record's
// primary key and the sandbox's unique downstream key are shared, so
// exactly one payment executes and one charge exists.
func TestTwoProcessesChargeOnce(t *testing.T) {
	t.Parallel()
	dsn := testdb.New(t, "postgres") // skips without TEST_DATABASE_URL
	bin := buildDemo(t)
	a := startDemo(t, bin, dsn)
	b := startDemo(t, bin, dsn)

	first := concurrentPayments(t, 20, []string{a, b}, "k-two-processes")

	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, b+"/v1/sandbox/charges", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+tokenAcme)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var charges []sandboxCharge
	if err := json.NewDecoder(res.Body).Decode(&charges); err != nil {
		t.Fatal(err)
	}
	var p struct {
		ProviderChargeID string `json:"provider_charge_id"`
	}
	if err := json.Unmarshal(first.Body, &p); err != nil {
		t.Fatal(err)
	}
	if len(charges) != 1 || charges[0].ID != p.ProviderChargeID {
		t.Fatalf("sandbox charges = %+v, want exactly %s", charges, p.ProviderChargeID)
	}
	// Each process replays the stored answer.
	client := &http.Client{}
	for _, base := range []string{a, b} {
		r, err := post(client, base, tokenAcme, "k-two-processes", paymentBody(4200, "pm_card_visa"))
		if err != nil {
			t.Fatal(err)
		}
		wantReplay(t, r, first)
	}
}
