package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/retrysafe/retrysafe/internal/demoproc"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// listeningPrefix starts the line the demo prints once it serves.
const listeningPrefix = demoproc.ListeningPrefix

// buildDemo compiles ./cmd/demo into a temporary directory.
func buildDemo(t *testing.T) string { return demoproc.Build(t) }

// startDemo starts the demo binary on a random port against dsn and
// returns its base URL; the process is killed when the test ends.
func startDemo(t *testing.T, bin, dsn string) string {
	t.Helper()
	return demoproc.Start(t, demoproc.Config{Bin: bin, DSN: dsn}).URL()
}

// TestTwoProcessesChargeOnce runs two demo processes on one database, on
// each server configured (PostgreSQL, MariaDB), and splits concurrent
// same-key payments between them: the record's primary key and the
// sandbox's unique downstream key are shared, so exactly one payment
// executes and one charge exists.
func TestTwoProcessesChargeOnce(t *testing.T) {
	t.Parallel()
	servers := testdb.Servers(t)
	bin := buildDemo(t)
	for _, server := range servers {
		t.Run(server, func(t *testing.T) {
			t.Parallel()
			twoProcessesChargeOnce(t, bin, testdb.New(t, server))
		})
	}
}

// twoProcessesChargeOnce is TestTwoProcessesChargeOnce on the database
// dsn.
func twoProcessesChargeOnce(t *testing.T, bin, dsn string) {
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
