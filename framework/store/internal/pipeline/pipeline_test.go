package pipeline_test

import (
	"slices"
	"testing"

	"github.com/retrysafe/retrysafe/framework/store/internal/pipeline"
)

// TestQuestionMarks: numbered placeholders become ?, with the arguments
// in the order the statement uses them; quoted text is left alone.
func TestQuestionMarks(t *testing.T) {
	for _, c := range []struct {
		sql, want string
		args, got []any
	}{
		{"INSERT INTO t VALUES (?, ?)", "INSERT INTO t VALUES (?, ?)", []any{1, 2}, []any{1, 2}},
		{"INSERT INTO t VALUES ($1, $2)", "INSERT INTO t VALUES (?, ?)", []any{1, 2}, []any{1, 2}},
		{"UPDATE t SET a = $2 WHERE k = $1 AND j = $1", "UPDATE t SET a = ? WHERE k = ? AND j = ?", []any{1, 2}, []any{2, 1, 1}},
		{"SELECT '$1', `$2`, $1", "SELECT '$1', `$2`, ?", []any{9}, []any{9}},
		{"SELECT JSON_EXTRACT(j, '$.a') FROM t WHERE k = $1", "SELECT JSON_EXTRACT(j, '$.a') FROM t WHERE k = ?", []any{3}, []any{3}},
		{"SELECT cost$1 FROM t WHERE k = $1", "SELECT cost$1 FROM t WHERE k = ?", []any{3}, []any{3}},
		{"SELECT ?, $1 FROM t", "SELECT ?, $1 FROM t", []any{4, 5}, []any{4, 5}},
	} {
		sql, args := pipeline.QuestionMarks(c.sql, c.args)
		if sql != c.want || !slices.Equal(args, c.got) {
			t.Errorf("%s: %s %v, want %s %v", c.sql, sql, args, c.want, c.got)
		}
	}
}

// TestNumberPlaceholdersAndBack: ? become $1, $2, … outside quoted text,
// and QuestionMarks brings the statement back as it was.
func TestNumberPlaceholdersAndBack(t *testing.T) {
	sql := "INSERT INTO t (a, b) VALUES (?, '?') ON CONFLICT DO UPDATE SET c = ?, \"d?\" = 1"
	numbered := pipeline.NumberPlaceholders(sql)
	if want := "INSERT INTO t (a, b) VALUES ($1, '?') ON CONFLICT DO UPDATE SET c = $2, \"d?\" = 1"; numbered != want {
		t.Fatalf("numbered: %s, want %s", numbered, want)
	}
	back, args := pipeline.QuestionMarks(numbered, []any{1, 2})
	if back != sql || !slices.Equal(args, []any{1, 2}) {
		t.Fatalf("back: %s %v, want %s [1 2]", back, args, sql)
	}
}
