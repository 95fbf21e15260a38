package tests

import (
	"context"
	"net/http"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/client"
	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/internal/testclock"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/payments"
)

// serverTimeTransport moves the test clock by the time a default server
// and network would have taken, which the test's server does not: a lost
// answer costs the client its AttemptTimeout (the process died and the
// client learned it when the attempt timed out), and a 409
// request_in_progress the server's in-progress wait (the test's server
// answers at once).
type serverTimeTransport struct {
	next  http.RoundTripper
	clock *testclock.Clock
}

func (st serverTimeTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	res, err := st.next.RoundTrip(r)
	switch {
	case err != nil:
		st.clock.Advance(client.DefaultAttemptTimeout)
	case res.StatusCode == http.StatusConflict:
		st.clock.Advance(postkeys.DefaultInProgressWait)
	}
	return res, err
}

// TestClientDefaultsOutlastAKilledAttempt: the process running a payment
// dies after the provider charged and before the charge was recorded, and
// the client learns of it only when its attempt times out. The key stays
// leased to the dead attempt for the server's default lease; the client,
// with its default caps, keeps retrying through the 409s until the lease
// has ended, and its retry takes the payment over: one charge, one
// payment, the record completed, instead of a client that gave up while
// the key was held.
func TestClientDefaultsOutlastAKilledAttempt(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		crash := &crashOnce{point: payments.FailPointAfterCharge}
		ce := clientSetupWith(t, dsn, crash.failPoint, func(c *app.Config) {
			c.PostKeys.InProgressWait = -1
		})
		ce.skipWithoutPayments(t)
		c := ce.newClient(t, func(c *client.Config) {
			c.HTTPClient = &http.Client{Transport: serverTimeTransport{next: ce.faults, clock: ce.clock}}
			c.NowFunc = ce.clock.Now
			c.SleepFunc = func(ctx context.Context, d time.Duration) error {
				ce.clock.Advance(d)
				return ctx.Err()
			}
		})
		const key = "killed-attempt"
		ce.faults.setPlan(key, []clientFault{loseAnswer})
		start := ce.clock.Now()
		res, err := c.Post(t.Context(), client.PostRequest{Path: "/v1/payments", Key: key, Body: paymentBody(4200, "pm_card_visa")})
		if err != nil {
			t.Fatalf("Post gave up after %v of client time: %v", ce.clock.Now().Sub(start), err)
		}
		if res.Status != http.StatusCreated {
			t.Fatalf("Post: %d %s", res.Status, res.Body)
		}
		if elapsed := ce.clock.Now().Sub(start); elapsed < postkeys.DefaultLeaseDuration || elapsed > client.DefaultMaxElapsed {
			t.Fatalf("done after %v of client time, want past the lease (%v) and within MaxElapsed (%v)",
				elapsed, postkeys.DefaultLeaseDuration, client.DefaultMaxElapsed)
		}
		crash.mu.Lock()
		hits := crash.hits
		crash.mu.Unlock()
		if hits != 2 {
			t.Fatalf("the charge's fail point was reached %d times, want 2 (the killed attempt, the takeover)", hits)
		}
		charges := ce.sandboxChargeIDs(t)
		if len(charges) != 1 || charges[0] != providerChargeID(t, res.Body) {
			t.Fatalf("sandbox charges %v for the answer %s: want its one charge", charges, res.Body)
		}
		if n := ce.count("payments", "tenant_id = ? AND status = ?", "acme", "succeeded"); n != 1 || ce.count("payments", "") != 1 {
			t.Fatalf("%d succeeded payments of %d, want the one", n, ce.count("payments", ""))
		}
		if n := ce.count(idempotencyTable, "idem_key = ? AND state = ?", key, "completed"); n != 1 {
			t.Fatalf("the key's record is not completed (%d rows)", n)
		}
	})
}

// TestClientDefaultsFitTheServerDefaults: the sizing rule of
// client.Config.MaxElapsed and MaxAttempts holds between the client's
// defaults and the server's.
func TestClientDefaultsFitTheServerDefaults(t *testing.T) {
	t.Parallel()
	const retryAfter = time.Second // of 409 request_in_progress
	need := postkeys.DefaultLeaseDuration + 2*client.DefaultAttemptTimeout + client.DefaultMaxDelay + postkeys.DefaultInProgressWait
	if client.DefaultMaxElapsed < need {
		t.Fatalf("client.DefaultMaxElapsed %v < lease + 2 × AttemptTimeout + MaxDelay + in-progress wait = %v",
			client.DefaultMaxElapsed, need)
	}
	if tries := time.Duration(client.DefaultMaxAttempts) * (postkeys.DefaultInProgressWait + retryAfter); tries < client.DefaultMaxElapsed {
		t.Fatalf("client.DefaultMaxAttempts × (in-progress wait + Retry-After) = %v < MaxElapsed %v: the count ends the retries first",
			tries, client.DefaultMaxElapsed)
	}
}
