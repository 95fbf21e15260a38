package tests

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/fallback/postkeys"
	"github.com/retrysafe/retrysafe/internal/failpoint"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/resources/payments"
)

// crashOnce fails the named fail point of payments.create the first time it
// is reached: the attempt stops there as a crashed process would.
type crashOnce struct {
	point string
	mu    sync.Mutex
	hits  int
}

func (c *crashOnce) failPoint(_ context.Context, operation, point string) error {
	if operation != payments.Operation || point != c.point {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hits++; c.hits == 1 {
		return errors.New("simulated crash")
	}
	return nil
}

// crashEnv is an env whose payments crash once at point. Requests that find
// a live lease answer 409 at once instead of waiting.
func crashEnv(t *testing.T, dsn, point string) (*env, *crashOnce) {
	t.Helper()
	crash := &crashOnce{point: point}
	e := newEnvWith(t, dsn, crash.failPoint, func(c *app.Config) {
		c.PostKeys.InProgressWait = -1
	})
	return e, crash
}

// crash sends the payment whose attempt dies at the fail point.
func (e *env) crash(key string, body []byte) {
	e.t.Helper()
	r := e.pay(tokenAcme, key, body)
	wantStatus(e.t, r, http.StatusInternalServerError)
	if n := e.count(idempotencyTable, "state = ?", "in_progress"); n != 1 {
		e.t.Fatalf("%d in-progress records after the crash, want 1", n)
	}
	// The lease is still running: a retry is told to come back.
	busy := e.pay(tokenAcme, key, body)
	wantStatus(e.t, busy, http.StatusConflict)
	if code := busy.Code(e.t); code != "request_in_progress" {
		e.t.Fatalf("retry within the lease: code %q", code)
	}
}

// wantOneCharge checks that the tenant's one charge is the payment's.
func (e *env) wantOneCharge(r response) {
	e.t.Helper()
	charges := e.charges(tokenAcme, "")
	if len(charges) != 1 || r.JSON(e.t)["provider_charge_id"] != charges[0].ID {
		e.t.Fatalf("payment %s; sandbox charges %+v: want exactly its one charge", r.Body, charges)
	}
	if n := e.count("payments", ""); n != 1 {
		e.t.Fatalf("%d payments, want 1", n)
	}
}

const pastLease = postkeys.DefaultLeaseDuration + time.Second

// TestPaymentCrashAfterChargeRetryResumes: the provider charged, the process
// died before recording it. The retry after the lease takes the record over,
// resumes from payment_created and asks the provider again with the same
// downstream key: the existing charge comes back, no second one is made.
func TestPaymentCrashAfterChargeRetryResumes(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e, _ := crashEnv(t, dsn, payments.FailPointAfterCharge)
		body := paymentBody(4200, "pm_card_visa")
		e.crash("k-crash-2", body)
		if n := len(e.charges(tokenAcme, "")); n != 1 {
			t.Fatalf("%d charges after the crash, want 1", n)
		}
		if n := e.count("payments", "status = ?", "pending"); n != 1 {
			t.Fatalf("%d pending payments, want 1", n)
		}
		e.clock.Advance(pastLease)
		final := e.pay(tokenAcme, "k-crash-2", body)
		wantStatus(t, final, http.StatusCreated)
		e.wantOneCharge(final)
		wantReplay(t, e.pay(tokenAcme, "k-crash-2", body), final)
	})
}

// TestPaymentCrashAfterChargeRecoveryWorkerReconciles: the same crash, settled
// by the recovery worker, which has no request: its reconcile hook looks the
// charge up by the payment's downstream key. The client's retry replays.
func TestPaymentCrashAfterChargeRecoveryWorkerReconciles(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e, _ := crashEnv(t, dsn, payments.FailPointAfterCharge)
		body := paymentBody(4200, "pm_card_visa")
		e.crash("k-crash-2w", body)
		e.clock.Advance(pastLease)
		stats, err := e.app.PostKeys.RecoverOnce(context.Background())
		if err != nil || stats.Completed != 1 {
			t.Fatalf("RecoverOnce = %+v, %v; want one completed", stats, err)
		}
		r := e.pay(tokenAcme, "k-crash-2w", body)
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "true" || r.Header.Get("Location") == "" {
			t.Fatalf("the reconciled outcome is not replayed with its headers: %v", r.Header)
		}
		e.wantOneCharge(r)
	})
}

// TestPaymentCrashBeforeChargeChargesOnce: the process died after the pending
// payment committed and before the provider was called. The worker's
// reconcile finds no charge under the downstream key and makes it, once.
func TestPaymentCrashBeforeChargeChargesOnce(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e, _ := crashEnv(t, dsn, failpoint.AfterPhase+payments.PointCreated)
		body := paymentBody(4200, "pm_card_visa")
		e.crash("k-crash-1", body)
		if n := len(e.charges(tokenAcme, "")); n != 0 {
			t.Fatalf("%d charges before the provider was called, want 0", n)
		}
		e.clock.Advance(pastLease)
		if stats, err := e.app.PostKeys.RecoverOnce(context.Background()); err != nil || stats.Completed != 1 {
			t.Fatalf("RecoverOnce = %+v, %v", stats, err)
		}
		r := e.pay(tokenAcme, "k-crash-1", body)
		wantStatus(t, r, http.StatusCreated)
		e.wantOneCharge(r)
	})
}

// TestPaymentCrashBeforeCompleteLeavesNothingHalfRecorded: the process
// died after the charge, right before the transaction that records it.
// That transaction commits the payment's outcome, its outbox event, the
// last recovery point and the stored response together, with fail points
// set as without: none of them is there, the record is still at
// payment_created. The retry resumes from there and finds the one charge
// by its downstream key.
func TestPaymentCrashBeforeCompleteLeavesNothingHalfRecorded(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e, _ := crashEnv(t, dsn, failpoint.BeforeComplete)
		body := paymentBody(4200, "pm_card_visa")
		e.crash("k-crash-3", body)
		if n := e.count("payments", "status = ?", "pending"); n != 1 {
			t.Fatalf("%d pending payments, want 1: the charge was recorded without its stored response", n)
		}
		if n := e.count(idempotencyTable, "recovery_point = ?", payments.PointCreated); n != 1 {
			t.Fatalf("%d records at %s, want 1", n, payments.PointCreated)
		}
		if n := e.outboxEvents(payments.EventSucceeded); n != 0 {
			t.Fatalf("%d payment events before the payment was recorded", n)
		}
		if n := len(e.charges(tokenAcme, "")); n != 1 {
			t.Fatalf("%d charges after the crash, want 1", n)
		}
		e.clock.Advance(pastLease)
		r := e.pay(tokenAcme, "k-crash-3", body)
		wantStatus(t, r, http.StatusCreated)
		e.wantOneCharge(r)
		if n := e.outboxEvents(payments.EventSucceeded); n != 1 {
			t.Fatalf("%d payment events, want 1", n)
		}
	})
}

// TestPaymentLostResponseReplays: the response is stored, then the
// connection is cut before the client reads it. The retry gets the original
// answer as a plain replay.
func TestPaymentLostResponseReplays(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn)
		recorded := make(chan *httptest.ResponseRecorder, 1)
		cut := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			rec := httptest.NewRecorder()
			e.app.Handler().ServeHTTP(rec, r)
			recorded <- rec
			conn, _, err := http.NewResponseController(w).Hijack()
			if err != nil {
				t.Errorf("hijack: %v", err)
				return
			}
			_ = conn.Close()
		}))
		defer cut.Close()
		client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
		if _, err := post(client, cut.URL, tokenAcme, "k-lost", paymentBody(4200, "pm_card_visa")); err == nil {
			t.Fatal("the cut connection delivered a response")
		}
		lost := <-recorded
		if lost.Code != http.StatusCreated {
			t.Fatalf("the lost response was not a 201: %+v", lost)
		}
		original := response{Status: lost.Code, Header: lost.Header(), Body: lost.Body.Bytes()}
		r := e.pay(tokenAcme, "k-lost", paymentBody(4200, "pm_card_visa"))
		wantReplay(t, r, original)
		e.wantOneCharge(r)
	})
}

// TestPaymentOutcomePendingSettledByWorker: the sandbox loses its first
// answer; before the client retries, the recovery worker reconciles the
// unknown record, and the retry replays the one charge.
func TestPaymentOutcomePendingSettledByWorker(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		e := newEnv(t, dsn, losesAnswersQuickly)
		body := paymentBody(4200, "pm_card_timeout_after_charge")
		first := e.pay(tokenAcme, "k-pending", body)
		wantStatus(t, first, http.StatusConflict)
		if stats, err := e.app.PostKeys.RecoverOnce(context.Background()); err != nil || stats.Completed != 1 {
			t.Fatalf("RecoverOnce = %+v, %v", stats, err)
		}
		r := e.pay(tokenAcme, "k-pending", body)
		wantStatus(t, r, http.StatusCreated)
		if r.Header.Get("Idempotent-Replayed") != "true" {
			t.Fatalf("not a replay: %v", r.Header)
		}
		e.wantOneCharge(r)
	})
}
