package demoproc_test

import (
	"net/http"
	"path/filepath"
	"testing"

	"github.com/retrysafe/retrysafe/internal/demoproc"
)

// TestKillAndRestartOnSameAddress: the demo serves, dies with SIGKILL and
// serves again on the same URL.
func TestKillAndRestartOnSameAddress(t *testing.T) {
	t.Parallel()
	p := demoproc.Start(t, demoproc.Config{Bin: demoproc.Build(t), DSN: "sqlite:" + filepath.Join(t.TempDir(), "demo.db")})
	url := p.URL()
	healthy := func() bool {
		res, err := http.Get(url + "/healthz")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	}
	if !healthy() {
		t.Fatal("the demo does not serve /healthz")
	}
	p.Kill()
	http.DefaultClient.CloseIdleConnections()
	if healthy() {
		t.Fatal("a killed demo answered")
	}
	p.Restart()
	if p.URL() != url || !healthy() {
		t.Fatalf("after restart: URL %s (was %s), healthy %v", p.URL(), url, healthy())
	}
}
