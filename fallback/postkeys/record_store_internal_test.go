package postkeys

import (
	"fmt"
	"testing"
)

// TestNumberArgs: each named argument gets one number, in the order of its
// first use, however often it occurs; the arguments follow that order.
func TestNumberArgs(t *testing.T) {
	q := numberArgs("SELECT 1 WHERE a = @tenant AND b = CAST(@off AS interval) AND c = @tenant AND d = @next_fence AND e = @Key2")
	if want := "SELECT 1 WHERE a = $1 AND b = CAST($2 AS interval) AND c = $1 AND d = $3 AND e = $4"; q.sql != want {
		t.Fatalf("got %s\nwant %s", q.sql, want)
	}
	got := q.values(map[string]any{"off": "0 microseconds", "tenant": "acme", "next_fence": 7, "Key2": "k", "unused": true})
	if fmt.Sprint(got) != "[acme 0 microseconds 7 k]" {
		t.Fatalf("values %v", got)
	}
	for name, sql := range newGormRecordStore(postgresRecords, nil, nil).numbered {
		if numbered := numberArgs(sql.sql); len(numbered.names) != 0 {
			t.Errorf("%s keeps named arguments %v", name, numbered.names)
		}
	}
}
