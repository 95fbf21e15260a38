package collection_test

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/internal/testdb"
)

// recorded keeps the level and message of every record a handler at
// minimum lets through.
type recorded struct {
	mu      sync.Mutex
	minimum slog.Level
	lines   []string
}

func (r *recorded) Enabled(_ context.Context, l slog.Level) bool { return l >= r.minimum }
func (r *recorded) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.lines = append(r.lines, rec.Level.String()+" "+rec.Message)
	return nil
}
func (r *recorded) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *recorded) WithGroup(string) slog.Handler      { return r }

func (r *recorded) all() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.lines)
}

// TestRequestLogLevel: the per-request events are logged at
// EngineConfig.RequestLogLevel (Info by default), failures at their own
// level whatever it says.
func TestRequestLogLevel(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		level   slog.Level
		minimum slog.Level
		want    []string
	}{
		{"default", 0, slog.LevelInfo, []string{"INFO resource write"}},
		{"debug in a debug log", slog.LevelDebug, slog.LevelDebug, []string{"DEBUG resource write"}},
		{"debug in an info log", slog.LevelDebug, slog.LevelInfo, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			log := &recorded{minimum: c.minimum}
			h := setup(t, testdb.New(t, "sqlite"), func(o *setupOptions) {
				o.engine = func(cfg *framework.EngineConfig) {
					cfg.Logger, cfg.RequestLogLevel = slog.New(log), c.level
				}
			})
			if r := h.do("PUT", invoicePath(uuid.New()), "tok1", invoiceBody("cus_1", 100)); r.Status != http.StatusCreated {
				t.Fatalf("PUT: %d %s", r.Status, r.Body)
			}
			if got := log.all(); !slices.Equal(got, c.want) {
				t.Fatalf("logged %q, want %q", got, c.want)
			}
		})
	}

	log := &recorded{minimum: slog.LevelInfo}
	db := setup(t, testdb.New(t, "sqlite")).db
	engine, err := framework.NewEngine(db, framework.EngineConfig{Logger: slog.New(log), RequestLogLevel: slog.LevelDebug})
	if err != nil {
		t.Fatal(err)
	}
	rec := httptest.NewRecorder()
	engine.WriteProblem(rec, httptest.NewRequest(http.MethodGet, "/v1/x", nil), errors.New("boom"))
	if got := log.all(); rec.Code != http.StatusInternalServerError || !slices.Equal(got, []string{"ERROR request failed"}) {
		t.Fatalf("a 500 logged %q, want the failure", got)
	}
	if _, err := framework.NewEngine(db, framework.EngineConfig{RequestLogLevel: slog.LevelWarn}); err == nil {
		t.Fatal("a request log level above Info was accepted")
	}
}
