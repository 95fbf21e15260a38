package tests

import (
	"context"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/payments"
)

// stallingProvider does not answer its first charge until the caller's
// context ends (a provider slower than the request deadline); later calls
// go to the sandbox.
type stallingProvider struct {
	payments.Provider
	once    sync.Once
	stalled chan struct{}
}

func (p *stallingProvider) Charge(ctx context.Context, req payments.ChargeRequest) (payments.Charge, error) {
	first := false
	p.once.Do(func() { first = true })
	if !first {
		return p.Provider.Charge(ctx, req)
	}
	close(p.stalled)
	<-ctx.Done()
	return payments.Charge{}, ctx.Err()
}

// TestPaymentDeadlineDuringProviderCallSaysSo: the provider call outlives
// the request deadline. The request answers 503 (the recovery worker
// finishes the payment later, charging once), and the log says what ran
// out and where: the request deadline, during the provider call; not that
// the database is unavailable, which it never was.
func TestPaymentDeadlineDuringProviderCallSaysSo(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		logs := &logRecords{}
		provider := &stallingProvider{stalled: make(chan struct{})}
		const providerTimeout = time.Minute // longer than the deadline: the deadline ends the call
		e := newEnv(t, dsn, func(c *app.Config) {
			c.Logger = slog.New(logs)
			c.RequestDeadline = 5 * time.Second // time enough, on a loaded machine, to reach the provider
			c.ProviderTimeout = providerTimeout
			c.ProviderFunc = func(p payments.Provider) payments.Provider { provider.Provider = p; return provider }
		})
		body := paymentBody(4200, "pm_card_visa")
		r := e.pay(tokenAcme, "k-deadline", body)
		select {
		case <-provider.stalled:
		default:
			t.Fatalf("the provider was never called; the answer was %d %s", r.Status, r.Body)
		}
		wantStatus(t, r, http.StatusServiceUnavailable)
		if code := r.Code(t); code != "unavailable" || r.Header.Get("Retry-After") == "" {
			t.Fatalf("code %q, Retry-After %q; want unavailable with Retry-After", code, r.Header.Get("Retry-After"))
		}
		var failed []string
		for _, rec := range logs.take() {
			line := render(rec)
			if strings.Contains(line, "database unavailable") {
				t.Errorf("logged as a database outage: %s", line)
			}
			if rec.Message == "request failed" {
				failed = append(failed, line)
			}
		}
		if len(failed) != 1 || !strings.Contains(failed[0], "request deadline") || !strings.Contains(failed[0], "provider call") {
			t.Fatalf("request failure logged as %q; want one line naming the request deadline and the provider call", failed)
		}

		// The recovery worker finishes the payment, charging once.
		e.clock.Advance(providerTimeout + pastLease)
		if stats, err := e.app.PostKeys.RecoverOnce(context.Background()); err != nil || stats.Completed != 1 {
			t.Fatalf("RecoverOnce = %+v, %v; want one completed", stats, err)
		}
		final := e.pay(tokenAcme, "k-deadline", body)
		wantStatus(t, final, http.StatusCreated)
		if final.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("the recovered payment is not replayed: %v", final.Header)
		}
		e.wantOneCharge(final)
	})
}
