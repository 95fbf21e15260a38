package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/internal/failpoint"
)

// faultFlags are the demo's settings for fault tests (tests/fault_*):
// a short lease and recovery interval, so that the work of a killed process
// is recovered within seconds, and a pause at a fail point, which widens a
// crash window (for example between a provider charge and its recording)
// so that a SIGKILL lands in it often. A pause changes no transaction the
// process commits (every fail point lies between two transactions,
// internal/failpoint), so a fault test runs the transactions production
// runs.
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

// holdLine starts the line printed on stdout when an attempt reaches the
// -pause-at point, so that a test can stop or race the process there.
const holdLine = "demo: holding an attempt at "

// postKeys returns the POST fallback configuration the flags ask for, and
// the fail point function of -pause-at (nil without it), which prints
// holdLine and its point to stdout when it pauses; the demo gives it the
// context of every request and of the workers (internal/failpoint).
func (f *faultFlags) postKeys(stdout io.Writer) (postkeys.Config, failpoint.Func, error) {
	c := postkeys.Config{LeaseDuration: f.lease, RecoveryInterval: f.recovery}
	if f.pauseAt == "" {
		return c, nil, nil
	}
	point, d, ok := strings.Cut(f.pauseAt, "=")
	pause, err := time.ParseDuration(d)
	if !ok || point == "" || err != nil || pause <= 0 {
		return c, nil, fmt.Errorf("-pause-at %q: want POINT=DURATION", f.pauseAt)
	}
	var mu sync.Mutex // one hold line at a time on stdout
	return c, func(ctx context.Context, operation, at string) error {
		if at != point {
			return nil
		}
		mu.Lock()
		fmt.Fprintln(stdout, holdLine+point)
		mu.Unlock()
		// Not cut short by ctx: a stalled process (SIGSTOP) wakes up with
		// its work still to do, which is what the fencing tests need.
		time.Sleep(pause)
		return nil
	}, nil
}
