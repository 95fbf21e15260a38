package main

import (
	"context"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
)

// faultFlags are the demo's settings for fault tests (tests/fault_*):
// a short lease and recovery interval, so that the work of a killed process
// is recovered within seconds, and a pause at a fail point, which widens a
// crash window (for example between a provider charge and its recording)
// so that a SIGKILL lands in it often.
type faultFlags struct {
	lease    time.Duration
	recovery time.Duration
	pauseAt  string
}

func addFaultFlags(fs *flag.FlagSet) *faultFlags {
	f := &faultFlags{}
	fs.DurationVar(&f.lease, "lease", 0, "lease of a POST fallback attempt (default 30s)")
	fs.DurationVar(&f.recovery, "recovery-interval", 0, "pause between recovery worker runs (default 10s)")
	fs.StringVar(&f.pauseAt, "pause-at", "", `for fault tests: "POINT=DURATION" sleeps at that fail point of every phased attempt (e.g. after_charge=200ms)`)
	return f
}

// postKeys returns the POST fallback configuration the flags ask for.
func (f *faultFlags) postKeys() (postkeys.Config, error) {
	c := postkeys.Config{LeaseDuration: f.lease, RecoveryInterval: f.recovery}
	if f.pauseAt == "" {
		return c, nil
	}
	point, d, ok := strings.Cut(f.pauseAt, "=")
	pause, err := time.ParseDuration(d)
	if !ok || point == "" || err != nil || pause <= 0 {
		return c, fmt.Errorf("-pause-at %q: want POINT=DURATION", f.pauseAt)
	}
	c.FailPointFunc = func(ctx context.Context, _, at string) error {
		if at != point {
			return nil
		}
		t := time.NewTimer(pause)
		defer t.Stop()
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		return nil
	}
	return c, nil
}
