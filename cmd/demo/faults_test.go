package main

import (
	"context"
	"flag"
	"io"
	"testing"
	"time"
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
	c, err := parse("-lease", "2s", "-recovery-interval", "200ms", "-pause-at", "after_charge=10ms").postKeys(io.Discard)
	if err != nil || c.LeaseDuration != 2*time.Second || c.RecoveryInterval != 200*time.Millisecond || c.FailPointFunc == nil {
		t.Fatalf("postKeys = %+v, %v", c, err)
	}
	start := time.Now()
	if err := c.FailPointFunc(context.Background(), "payments.create", "after_charge"); err != nil || time.Since(start) < 10*time.Millisecond {
		t.Fatalf("pause at after_charge: %v after %s", err, time.Since(start))
	}
	if err := c.FailPointFunc(context.Background(), "payments.create", "before_complete"); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"after_charge", "=1s", "after_charge=soon", "after_charge=-1s"} {
		if _, err := parse("-pause-at", bad).postKeys(io.Discard); err == nil {
			t.Errorf("-pause-at %q accepted", bad)
		}
	}
}
