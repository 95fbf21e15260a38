package collection

import (
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"
)

// TestDecidePut is DESIGN §5.1 as a table, without a database. now is the
// database clock as of the read (putState.DBNow), the rows' times are
// relative to it.
func TestDecidePut(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ret := framework.DefaultRetention()
	const fpA, fpB, fpC = "v1:" + "aaaaaaaa", "v1:" + "bbbbbbbb", "v1:" + "cccccccc"
	row := func(version int64, createFP, fp string, created, updated time.Duration) System {
		return System{Version: version, CreateFingerprint: createFP, Fingerprint: fp,
			CreatedAt: now.Add(-created), UpdatedAt: now.Add(-updated)}
	}
	deleted := func(s System, ago time.Duration) System {
		at := now.Add(-ago)
		s.DeletedAt = &at
		return s
	}
	fresh := row(1, fpA, fpA, time.Minute, time.Minute)
	replaced := row(2, fpA, fpB, 2*time.Hour, time.Minute)
	old := row(1, fpA, fpA, 48*time.Hour, 48*time.Hour)
	oldReplaced := row(3, fpA, fpB, 72*time.Hour, 48*time.Hour)
	freshTag := fresh.ETag()         // what a client holds after the create
	reborn := row(1, fpA, fpA, 0, 0) // the same body created again after a delete and the purge

	type want struct {
		action   putAction
		status   int
		replayed bool
		outcome  string
		code     wire.Code
	}
	cases := []struct {
		name string
		in   putState
		want want
	}{
		{"new ID: insert", putState{Fingerprint: fpA}, want{action: actInsert}},
		{"new ID with If-Match: 412", putState{Fingerprint: fpA, IfMatch: `"1-aaaaaaaa"`}, want{action: actRefuse, code: wire.CodePreconditionFailed}},
		{"same body within the window: 201 replay", putState{Fingerprint: fpA, Exists: true, Row: fresh},
			want{action: actReply, status: http.StatusCreated, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"same body after a status change, within the window: 201 replay", putState{Fingerprint: fpA, Exists: true,
			Row: row(2, fpA, fpA, time.Minute, time.Second)},
			want{action: actReply, status: http.StatusCreated, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"same body after the window: 200 converged", putState{Fingerprint: fpA, Exists: true, Row: old},
			want{action: actReply, status: http.StatusOK, outcome: telemetry.OutcomeConverged}},
		{"replacing body again within the window: 200 replay", putState{Fingerprint: fpB, Exists: true, Row: replaced},
			want{action: actReply, status: http.StatusOK, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"replacing body again after the window: 200 converged", putState{Fingerprint: fpB, Exists: true, Row: oldReplaced},
			want{action: actReply, status: http.StatusOK, outcome: telemetry.OutcomeConverged}},
		{"different body, unlocked read: take the lock", putState{Fingerprint: fpB, Exists: true, Row: fresh}, want{action: actLock}},
		{"different body under the lock: replace", putState{Fingerprint: fpB, Exists: true, Row: fresh, Locked: true},
			want{action: actReplace, status: http.StatusOK, outcome: telemetry.OutcomeExecuted}},
		{"different body, current If-Match, locked: replace", putState{Fingerprint: fpB, IfMatch: `"0-x", ` + freshTag, Exists: true, Row: fresh, Locked: true},
			want{action: actReplace, status: http.StatusOK, outcome: telemetry.OutcomeExecuted}},
		{"If-Match: * on an existing row, locked: replace", putState{Fingerprint: fpB, IfMatch: "*", Exists: true, Row: fresh, Locked: true},
			want{action: actReplace, status: http.StatusOK, outcome: telemetry.OutcomeExecuted}},
		{"different body, stale If-Match: 412", putState{Fingerprint: fpC, IfMatch: freshTag, Exists: true, Row: replaced},
			want{action: actRefuse, code: wire.CodePreconditionFailed}},
		{"weak If-Match never matches: 412", putState{Fingerprint: fpB, IfMatch: "W/" + freshTag, Exists: true, Row: fresh},
			want{action: actRefuse, code: wire.CodePreconditionFailed}},
		{"same body, stale If-Match: 200 converged, nothing written", putState{Fingerprint: fpB, IfMatch: freshTag, Exists: true, Row: replaced},
			want{action: actReply, status: http.StatusOK, replayed: true, outcome: telemetry.OutcomeConverged}},
		{"creating body, current If-Match: 200, never 201", putState{Fingerprint: fpA, IfMatch: freshTag, Exists: true, Row: fresh},
			want{action: actReply, status: http.StatusOK, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"PATCH of a new ID: 404", putState{Fingerprint: fpA, Patch: true}, want{action: actRefuse, code: wire.CodeNotFound}},
		{"PATCH of an expired tombstone: 410, never a purge", putState{Fingerprint: fpA, Patch: true, Exists: true, Row: deleted(fresh, 31*24*time.Hour)},
			want{action: actRefuse, code: wire.CodeResourceDeleted}},
		{"PATCH whose result is the creating body: 200, never 201", putState{Fingerprint: fpA, Patch: true, Exists: true, Row: fresh, Locked: true},
			want{action: actReply, status: http.StatusOK, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"PATCH with If-None-Match: * of a live row: 412, even when the result is the current state", putState{Fingerprint: fpA, Patch: true,
			IfNoneMatchStar: true, Exists: true, Row: fresh, Locked: true}, want{action: actRefuse, code: wire.CodePreconditionFailed}},
		{"PATCH with If-None-Match: * of a new ID: 404", putState{Patch: true, IfNoneMatchStar: true}, want{action: actRefuse, code: wire.CodeNotFound}},
		{"PATCH with If-None-Match: * of a tombstone: 410", putState{Patch: true, IfNoneMatchStar: true, Exists: true, Row: deleted(fresh, time.Hour)},
			want{action: actRefuse, code: wire.CodeResourceDeleted}},
		{"the deleted incarnation's ETag on a re-created ID (same body, same version): 412", putState{Fingerprint: fpB,
			IfMatch: freshTag, Exists: true, Row: reborn},
			want{action: actRefuse, code: wire.CodePreconditionFailed}},
		{"If-None-Match: * with the creating body: 201 replay", putState{Fingerprint: fpA, IfNoneMatchStar: true, Exists: true, Row: old},
			want{action: actReply, status: http.StatusCreated, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"If-None-Match: * with the creating body after a replace: 201 replay of the current row", putState{Fingerprint: fpA, IfNoneMatchStar: true, Exists: true, Row: replaced},
			want{action: actReplyCurrent, status: http.StatusCreated, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"If-None-Match: * with the current but not the creating body: 412", putState{Fingerprint: fpB, IfNoneMatchStar: true, Exists: true, Row: replaced},
			want{action: actRefuse, code: wire.CodePreconditionFailed}},
		{"If-None-Match: * with another body: 412", putState{Fingerprint: fpC, IfNoneMatchStar: true, Exists: true, Row: fresh},
			want{action: actRefuse, code: wire.CodePreconditionFailed}},
		{"legacy POST with another body: 422", putState{Fingerprint: fpC, IfNoneMatchStar: true, KeyReuse: true, Exists: true, Row: fresh},
			want{action: actRefuse, code: wire.CodeIdempotencyKeyReuse}},
		{"create-only, different body: 422", putState{Fingerprint: fpB, Mode: CreateOnly, Exists: true, Row: fresh},
			want{action: actRefuse, code: wire.CodeIdempotencyKeyReuse}},
		{"create-only, same body: 201 replay", putState{Fingerprint: fpA, Mode: CreateOnly, Exists: true, Row: fresh},
			want{action: actReply, status: http.StatusCreated, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"live tombstone: 410", putState{Fingerprint: fpA, Exists: true, Row: deleted(fresh, time.Hour)},
			want{action: actRefuse, code: wire.CodeResourceDeleted}},
		{"live tombstone with If-None-Match: *: 410", putState{Fingerprint: fpA, IfNoneMatchStar: true, Exists: true, Row: deleted(fresh, time.Hour)},
			want{action: actRefuse, code: wire.CodeResourceDeleted}},
		{"expired tombstone: purge", putState{Fingerprint: fpA, Exists: true, Row: deleted(fresh, 31*24*time.Hour)}, want{action: actPurge}},
		{"same body, created just inside the window: 201 replay", putState{Fingerprint: fpA, Exists: true,
			Row: row(1, fpA, fpA, ret.ReplayWindow-time.Microsecond, ret.ReplayWindow-time.Microsecond)},
			want{action: actReply, status: http.StatusCreated, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"same body, created a window ago: 200 converged", putState{Fingerprint: fpA, Exists: true,
			Row: row(1, fpA, fpA, ret.ReplayWindow, ret.ReplayWindow)},
			want{action: actReply, status: http.StatusOK, outcome: telemetry.OutcomeConverged}},
		{"same body, created after the read (a concurrent create stamped later): 201 replay", putState{Fingerprint: fpA, Exists: true,
			Row: row(1, fpA, fpA, -time.Second, -time.Second)},
			want{action: actReply, status: http.StatusCreated, replayed: true, outcome: telemetry.OutcomeReplayed}},
		{"tombstone just inside the retention: 410", putState{Fingerprint: fpA, Exists: true, Row: deleted(fresh, ret.TombstoneRetention-time.Microsecond)},
			want{action: actRefuse, code: wire.CodeResourceDeleted}},
		{"tombstone a retention ago: purge", putState{Fingerprint: fpA, Exists: true, Row: deleted(fresh, ret.TombstoneRetention)}, want{action: actPurge}},
		{"tombstone written after the read: 410", putState{Fingerprint: fpA, Exists: true, Row: deleted(fresh, -time.Second)},
			want{action: actRefuse, code: wire.CodeResourceDeleted}},
		{"expired tombstone already purged by this request: 410", putState{Fingerprint: fpA, Exists: true, Purged: true, Row: deleted(fresh, 31*24*time.Hour)},
			want{action: actRefuse, code: wire.CodeResourceDeleted}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.in.DBNow, tc.in.Retention = now, ret
			d := decidePut(tc.in)
			got := want{action: d.Action, status: d.Status, replayed: d.Replayed, outcome: d.Outcome}
			if d.Err != nil {
				e, ok := framework.AsError(d.Err)
				if !ok {
					t.Fatalf("error %v is not a problem", d.Err)
				}
				got.code = e.Code
			}
			if got != tc.want {
				t.Fatalf("decidePut = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// TestDecidePutConverges is the converge rule of conditional writes
// (DESIGN §5.1) over every combination, for PUT and PATCH, as decided under
// the row lock: a stale If-Match whose result is the current state is
// answered with it (200, nothing written); one whose result differs is
// 412; the replace guard and tombstones refuse whatever the If-Match.
func TestDecidePutConverges(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	const fpA, fpB, fpC = "v1:" + "aaaaaaaa", "v1:" + "bbbbbbbb", "v1:" + "cccccccc"
	// The row after one replace: version 2 holds fpB.
	row := System{Version: 2, CreateFingerprint: fpA, Fingerprint: fpB, CreatedAt: now.Add(-time.Hour), UpdatedAt: now.Add(-time.Minute)}
	stale := System{Version: 1, Fingerprint: fpA}
	staleTag := stale.ETag()
	locked := framework.Errorf(wire.CodeResourceLocked, "submitted")
	for _, method := range []string{"PUT", "PATCH"} {
		for _, state := range []string{"draft", "locked", "deleted"} {
			for _, ifMatch := range []string{"fresh", "stale"} {
				for _, result := range []string{"equal", "different"} {
					name := method + "/" + state + "/" + ifMatch + "/" + result
					in := putState{Fingerprint: fpB, IfMatch: row.ETag(), Patch: method == "PATCH", Exists: true, Row: row,
						Locked: true, DBNow: now, Retention: framework.DefaultRetention()}
					if state == "locked" {
						in.Guard = locked
					}
					if state == "deleted" {
						at := now.Add(-time.Minute)
						in.Row.DeletedAt = &at
					}
					if ifMatch == "stale" {
						in.IfMatch = staleTag
					}
					if result == "different" {
						in.Fingerprint = fpC
					}
					var want putDecision
					switch {
					case state == "deleted":
						want = putDecision{Action: actRefuse, Err: framework.ErrResourceDeleted}
					case result == "equal" && ifMatch == "stale":
						want = putDecision{Action: actReply, Status: http.StatusOK, Replayed: true, Outcome: telemetry.OutcomeConverged}
					case result == "equal":
						want = putDecision{Action: actReply, Status: http.StatusOK, Replayed: true, Outcome: telemetry.OutcomeReplayed}
					case ifMatch == "stale":
						want = putDecision{Action: actRefuse, Err: framework.ErrPreconditionFailed}
					case state == "locked":
						want = putDecision{Action: actRefuse, Err: framework.ErrResourceLocked}
					default:
						want = putDecision{Action: actReplace, Status: http.StatusOK, Outcome: telemetry.OutcomeExecuted}
					}
					got := decidePut(in)
					if got.Action != want.Action || got.Status != want.Status || got.Replayed != want.Replayed ||
						got.Outcome != want.Outcome || (want.Err == nil) != (got.Err == nil) ||
						(want.Err != nil && !errors.Is(got.Err, want.Err)) {
						t.Errorf("%s: decidePut = %+v, want %+v", name, got, want)
					}
				}
			}
		}
	}
}

func TestDefaultRepresentation(t *testing.T) {
	t.Parallel()
	s := &System{Status: `dr"aft`, Version: 3, CreatedAt: time.Date(2026, 1, 2, 3, 4, 5, 6000, time.UTC), UpdatedAt: time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)}
	const head = `{"id":"00000000-0000-0000-0000-000000000000","status":"dr\"aft","version":3,"created_at":"2026-01-02T03:04:05.000006Z","updated_at":"2026-01-02T03:04:06Z"`
	if got := string(defaultRepresentation(s, []byte(`{"a":1}`))); got != head+`,"a":1}` {
		t.Fatalf("got %s", got)
	}
	if got := string(defaultRepresentation(s, []byte(`{}`))); got != head+`}` {
		t.Fatalf("got %s", got)
	}
}
