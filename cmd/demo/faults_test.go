package main

import (
	"context"
	"flag"
	"io"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/internal/failpoint"
)

func TestFaultFlags(t *testing.T) {
	t.Parallel()
	parse := func(args ...string) *faultFlags {
		t.Helper()
		fs := flag.NewFlagSet("demo", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		f := addFaultFlags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		return f
	}
	c, pause, err := parse("-lease", "2s", "-recovery-interval", "200ms", "-pause-at", "after_charge=10ms").postKeys(io.Discard)
	if err != nil || c.LeaseDuration != 2*time.Second || c.RecoveryInterval != 200*time.Millisecond || pause == nil {
		t.Fatalf("postKeys = %+v, %v", c, err)
	}
	// The pause reaches an attempt through its context.
	ctx := failpoint.With(context.Background(), pause)
	start := time.Now()
	if err := failpoint.Reach(ctx, "payments.create", "after_charge"); err != nil || time.Since(start) < 10*time.Millisecond {
		t.Fatalf("pause at after_charge: %v after %s", err, time.Since(start))
	}
	if err := failpoint.Reach(ctx, "payments.create", "before_complete"); err != nil {
		t.Fatal(err)
	}
	if _, pause, err := parse("-lease", "2s").postKeys(io.Discard); err != nil || pause != nil {
		t.Fatalf("without -pause-at: %v, %v", pause != nil, err)
	}
	for _, bad := range []string{"after_charge", "=1s", "after_charge=soon", "after_charge=-1s"} {
		if _, _, err := parse("-pause-at", bad).postKeys(io.Discard); err == nil {
			t.Errorf("-pause-at %q accepted", bad)
		}
	}
}
