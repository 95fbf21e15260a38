package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
)

// Environment variables that tune the POST fallback of the demo. The fault
// tests use them to stall an attempt past a short lease without waiting
// for the default 30 s.
const (
	// EnvLease sets postkeys.Config.LeaseDuration (a Go duration, "2s").
	envLease = "DEMO_POSTKEYS_LEASE"
	// EnvRecoveryInterval sets postkeys.Config.RecoveryInterval.
	envRecoveryInterval = "DEMO_POSTKEYS_RECOVERY_INTERVAL"
	// envHold is for fault tests only: "POINT=DURATION" makes every
	// phased attempt pause that long at the fail point POINT
	// ("after_claim", "after_phase:payment_created", …), after printing holdLine
	// and the point on stdout, so that a test can stop or race the process
	// there.
	envHold = "DEMO_TEST_HOLD"
)

// holdLine starts the line printed on stdout when an attempt reaches the
// hold.
const holdLine = "demo: holding an attempt at "

// postKeysConfig reads the POST fallback's settings from the environment.
func postKeysConfig(getenv func(string) string, stdout io.Writer) (postkeys.Config, error) {
	var cfg postkeys.Config
	for name, dst := range map[string]*time.Duration{envLease: &cfg.LeaseDuration, envRecoveryInterval: &cfg.RecoveryInterval} {
		if v := getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return cfg, fmt.Errorf("%s=%q: want a positive duration", name, v)
			}
			*dst = d
		}
	}
	if v := getenv(envHold); v != "" {
		at, d, _ := strings.Cut(v, "=")
		hold, err := time.ParseDuration(d)
		if err != nil || hold <= 0 || at == "" {
			return cfg, fmt.Errorf("%s=%q: want POINT=DURATION", envHold, v)
		}
		var mu sync.Mutex
		cfg.FailPointFunc = func(ctx context.Context, operation, point string) error {
			if point != at {
				return nil
			}
			mu.Lock()
			fmt.Fprintln(stdout, holdLine+point)
			mu.Unlock()
			time.Sleep(hold)
			return nil
		}
	}
	return cfg, nil
}
