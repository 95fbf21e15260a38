package recordsql

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

// TestNumberArgs: each named argument gets one number, in the order of its
// first use, however often it occurs; the arguments follow that order.
func TestNumberArgs(t *testing.T) {
	q := numberArgs("SELECT 1 WHERE a = @tenant AND b = CAST(@shift AS interval) AND c = @tenant AND d = @next_fence AND e = @Key2")
	if want := "SELECT 1 WHERE a = $1 AND b = CAST($2 AS interval) AND c = $1 AND d = $3 AND e = $4"; q.sql != want {
		t.Fatalf("got %s\nwant %s", q.sql, want)
	}
	got := q.values(map[string]any{"shift": "0 microseconds", "tenant": "acme", "next_fence": 7, "Key2": "k", "unused": true})
	if fmt.Sprint(got) != "[acme 0 microseconds 7 k]" {
		t.Fatalf("values %v", got)
	}
}

// TestPositionalArgs: each occurrence of a named argument is a ?, and the
// arguments follow the occurrences, repeats included.
func TestPositionalArgs(t *testing.T) {
	q := positionalArgs("SELECT 1 WHERE a = @tenant AND b = (NOW() + INTERVAL @shift MICROSECOND) AND c = @tenant AND e = @Key2")
	if want := "SELECT 1 WHERE a = ? AND b = (NOW() + INTERVAL ? MICROSECOND) AND c = ? AND e = ?"; q.sql != want {
		t.Fatalf("got %s\nwant %s", q.sql, want)
	}
	got := q.values(map[string]any{"shift": 0, "tenant": "acme", "Key2": "k", "unused": true})
	if fmt.Sprint(got) != "[acme 0 acme k]" {
		t.Fatalf("values %v", got)
	}
}

// TestNumberedStatementsHaveEveryArgument: the numbered statements are
// sent with their arguments by position, where a name the statement uses
// and its arguments lack would go out as NULL without an error; every
// name of get has its argument, with the clock as a driver spells it and
// moved as storetest moves it (Bind).
func TestNumberedStatementsHaveEveryArgument(t *testing.T) {
	for _, positional := range []bool{false, true} {
		for _, moved := range []bool{false, true} {
			testStatementsHaveEveryArgument(t, positional, moved)
		}
	}
}

func testStatementsHaveEveryArgument(t *testing.T, positional, moved bool) {
	sp := Spelling{
		Clock: func(shifts ...string) string {
			clock := "clock()"
			for _, d := range shifts {
				clock = "(" + clock + " + @" + d + ")"
			}
			return clock
		},
		NextFence:  "next_fence()",
		AgeSeconds: "age({time}, {now})",
		Duration:   func(d time.Duration) string { return d.String() },
		Numbered:   !positional,
		Positional: positional,
	}
	if moved {
		clock := sp.Clock
		sp.Clock = func(shifts ...string) string { return clock(append([]string{"moved"}, shifts...)...) }
		sp.Bind = func(args map[string]any) { args["moved"] = "1h" }
	}
	s := New(sp, nil).(*records)
	args := map[string]map[string]any{
		"get": s.args(store.RecordKey{Tenant: "t", Operation: "o", Key: "k"}, nil),
	}
	if len(s.numbered) != len(args) {
		t.Fatalf("numbered statements %d, checked %d", len(s.numbered), len(args))
	}
	for name, q := range s.numbered {
		if len(q.names) == 0 {
			t.Errorf("%s: no numbered arguments: %s", name, q.sql)
		}
		if uses := slices.Contains(q.names, "moved"); uses != moved {
			t.Errorf("%s: moved clock %v, but the statement names it: %v (%s)", name, moved, uses, q.sql)
		}
		for _, arg := range q.names {
			if _, ok := args[name][arg]; !ok {
				t.Errorf("%s uses @%s, which its arguments lack", name, arg)
			}
		}
	}
}
