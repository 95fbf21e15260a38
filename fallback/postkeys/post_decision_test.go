package postkeys

import (
	"fmt"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

const (
	fpA  = "v1:" + "aaaaaaaa"
	fpB  = "v1:" + "bbbbbbbb"
	poll = 50 * time.Millisecond
)

// TestDecidePost is DESIGN §6 as a table, without a database: what a
// request with a key does with the record of its key.
func TestDecidePost(t *testing.T) {
	t.Parallel()
	rec := func(state store.RecordState, fp string) store.RecordRow {
		return store.RecordRow{State: state, Fingerprint: fp, Fence: 7}
	}
	expired := func(r store.RecordRow) store.RecordRow { r.Expired = true; return r }
	leaseEnded := func(r store.RecordRow) store.RecordRow { r.LeaseExpired = true; return r }
	completed, running, unknown := rec(store.RecordCompleted, fpA), rec(store.RecordInProgress, fpA), rec(store.RecordUnknown, fpA)

	type want struct {
		action postAction
		pause  time.Duration
		code   wire.Code
	}
	cases := []struct {
		name string
		in   postState
		want want
	}{
		{"local, new key: claim, before any business write", postState{Mode: Local}, want{action: postClaim}},
		{"local, expired record: claim", postState{Mode: Local, Found: true, Record: expired(completed)}, want{action: postClaim}},
		{"local, expired record of another request: claim", postState{Mode: Local, Found: true, Record: expired(rec(store.RecordCompleted, fpB))},
			want{action: postClaim}},
		{"local, completed: replay", postState{Mode: Local, Found: true, Record: completed}, want{action: postReplay}},
		{"local, completed for another request: 422", postState{Mode: Local, Found: true, Record: rec(store.RecordCompleted, fpB)},
			want{action: postRefuse, code: wire.CodeIdempotencyKeyReuse}},
		{"local, in progress: 409 without waiting", postState{Mode: Local, Found: true, Record: running, WaitLeft: time.Second},
			want{action: postRefuse, code: wire.CodeRequestInProgress}},
		{"local, in progress past its lease: 409, never a takeover", postState{Mode: Local, Found: true, Record: leaseEnded(running)},
			want{action: postRefuse, code: wire.CodeRequestInProgress}},
		{"local, unknown: 409 outcome_pending, never a reconcile", postState{Mode: Local, Found: true, Record: unknown},
			want{action: postRefuse, code: wire.CodeOutcomePending}},
		{"local, in progress for another request: 422", postState{Mode: Local, Found: true, Record: rec(store.RecordInProgress, fpB)},
			want{action: postRefuse, code: wire.CodeIdempotencyKeyReuse}},

		{"phased, new key: claim", postState{Mode: Phased}, want{action: postClaim}},
		{"phased, expired record: claim", postState{Mode: Phased, Found: true, Record: expired(completed)}, want{action: postClaim}},
		{"phased, expired record of another request: claim", postState{Mode: Phased, Found: true, Record: expired(rec(store.RecordCompleted, fpB))},
			want{action: postClaim}},
		{"phased, completed: replay", postState{Mode: Phased, Found: true, Record: completed}, want{action: postReplay}},
		{"phased, completed for another request: 422", postState{Mode: Phased, Found: true, Record: rec(store.RecordCompleted, fpB)},
			want{action: postRefuse, code: wire.CodeIdempotencyKeyReuse}},
		{"phased, unknown: take over and reconcile", postState{Mode: Phased, Found: true, Record: unknown}, want{action: postReconcile}},
		{"phased, unknown for another request: 422", postState{Mode: Phased, Found: true, Record: rec(store.RecordUnknown, fpB)},
			want{action: postRefuse, code: wire.CodeIdempotencyKeyReuse}},
		{"phased, in progress past its lease: take over and resume", postState{Mode: Phased, Found: true, Record: leaseEnded(running)},
			want{action: postResume}},
		{"phased, past its lease for another request: 422, no takeover", postState{Mode: Phased, Found: true,
			Record: leaseEnded(rec(store.RecordInProgress, fpB))}, want{action: postRefuse, code: wire.CodeIdempotencyKeyReuse}},
		{"phased, live lease, time to wait: look again after the poll interval", postState{Mode: Phased, Found: true, Record: running,
			WaitLeft: time.Second, PollInterval: poll}, want{action: postWait, pause: poll}},
		{"phased, live lease, less left than a poll: wait what is left", postState{Mode: Phased, Found: true, Record: running,
			WaitLeft: 10 * time.Millisecond, PollInterval: poll}, want{action: postWait, pause: 10 * time.Millisecond}},
		{"phased, live lease, the wait is over: 409", postState{Mode: Phased, Found: true, Record: running, PollInterval: poll},
			want{action: postRefuse, code: wire.CodeRequestInProgress}},
		{"phased, live lease, no wait configured: 409 at once", postState{Mode: Phased, Found: true, Record: running,
			WaitLeft: -time.Millisecond, PollInterval: poll}, want{action: postRefuse, code: wire.CodeRequestInProgress}},
		{"phased, live lease for another request: 422 without waiting", postState{Mode: Phased, Found: true,
			Record: rec(store.RecordInProgress, fpB), WaitLeft: time.Second, PollInterval: poll},
			want{action: postRefuse, code: wire.CodeIdempotencyKeyReuse}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.in.Fingerprint = fpA
			d := decidePost(tc.in)
			got := want{action: d.Action, pause: d.Pause}
			if d.Err != nil {
				e, ok := framework.AsError(d.Err)
				if !ok {
					t.Fatalf("error %v is not a problem", d.Err)
				}
				got.code = e.Code
			}
			if got != tc.want {
				t.Fatalf("decidePost = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDecidePostEveryState runs decidePost on every combination of mode,
// record, fingerprint and wait, and checks what must hold in all of them:
// only a request's own completed record is replayed, only a free key is
// claimed, only a phased record that nobody can still be writing is taken
// over, a local request never waits or takes over, and a refusal always
// says why.
func TestDecidePostEveryState(t *testing.T) {
	t.Parallel()
	n := 0
	for _, mode := range []Mode{Local, Phased} {
		for _, found := range []bool{false, true} {
			for _, state := range []store.RecordState{store.RecordInProgress, store.RecordCompleted, store.RecordUnknown} {
				for _, fp := range []string{fpA, fpB} {
					for _, flags := range []struct{ expired, leaseExpired bool }{{false, false}, {true, false}, {false, true}, {true, true}} {
						for _, wait := range []time.Duration{-time.Second, 0, time.Millisecond, time.Second} {
							in := postState{Mode: mode, Fingerprint: fpA, Found: found, WaitLeft: wait, PollInterval: poll}
							if found {
								in.Record = store.RecordRow{State: state, Fingerprint: fp, Expired: flags.expired, LeaseExpired: flags.leaseExpired}
							}
							d := decidePost(in)
							n++
							if err := postInvariant(in, d); err != nil {
								t.Errorf("decidePost(%+v) = %+v: %v", in, d, err)
							}
						}
					}
				}
			}
		}
	}
	if n != 2*2*3*2*4*4 {
		t.Fatalf("%d states checked", n)
	}
}

func postInvariant(in postState, d postDecision) error {
	r := in.Record
	live := in.Found && !r.Expired
	own := r.Fingerprint == in.Fingerprint
	switch d.Action {
	case postClaim:
		if live {
			return fmt.Errorf("claims a live record")
		}
	case postReplay:
		if !live || !own || r.State != store.RecordCompleted {
			return fmt.Errorf("replays what is not this request's completed record")
		}
	case postResume:
		if in.Mode != Phased || !live || !own || r.State != store.RecordInProgress || !r.LeaseExpired {
			return fmt.Errorf("resumes what is not this request's phased record past its lease")
		}
	case postReconcile:
		if in.Mode != Phased || !live || !own || r.State != store.RecordUnknown {
			return fmt.Errorf("reconciles what is not this request's unknown phased record")
		}
	case postWait:
		if in.Mode != Phased || !live || !own || r.State != store.RecordInProgress || r.LeaseExpired || in.WaitLeft <= 0 ||
			d.Pause <= 0 || d.Pause > in.PollInterval || d.Pause > in.WaitLeft {
			return fmt.Errorf("waits where it may not, or for the wrong time")
		}
	case postRefuse:
		if _, ok := framework.AsError(d.Err); !ok || !live {
			return fmt.Errorf("refuses without a problem, or refuses a free key")
		}
	default:
		return fmt.Errorf("unknown action")
	}
	if !own && live && (d.Action != postRefuse || framework.ErrorFor(d.Err).Code != wire.CodeIdempotencyKeyReuse) {
		return fmt.Errorf("another request's live record is not a 422")
	}
	return nil
}
