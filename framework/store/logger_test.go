package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// TestGormLoggerRendersOnlyWhatItLogs: a fast, successful statement (and a
// record not found) is never rendered; a failed one is logged with its
// placeholders and a redacted error, never with its values.
func TestGormLoggerRendersOnlyWhatItLogs(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := NewGormLogger(slog.New(slog.NewTextHandler(&buf, nil)), GormLoggerConfig{})
	rendered := 0
	fc := func() (string, int64) { rendered++; return "INSERT INTO t VALUES ($1)", 1 }
	ctx := context.Background()
	l.Trace(ctx, time.Now(), fc, nil)
	l.Trace(ctx, time.Now(), fc, gorm.ErrRecordNotFound)
	if rendered != 0 || buf.Len() != 0 {
		t.Fatalf("statements not logged were rendered %d times, logged %q", rendered, buf.String())
	}
	l.Trace(ctx, time.Now(), fc, &pgconn.PgError{Severity: "ERROR", Code: "22P02", Message: `invalid input syntax for type uuid: "secret-value"`})
	out := buf.String()
	if rendered != 1 || !strings.Contains(out, "INSERT INTO t VALUES ($1)") || !strings.Contains(out, "22P02") || strings.Contains(out, "secret-value") {
		t.Fatalf("failed statement logged as %q", out)
	}
	if sql, vars := l.(gorm.ParamsFilter).ParamsFilter(ctx, "SELECT $1", "secret"); sql != "SELECT $1" || vars != nil {
		t.Fatalf("ParamsFilter kept the values: %q %v", sql, vars)
	}
	// Silent and a disabled slog level do no work at all.
	buf.Reset()
	for _, quiet := range []gormlogger.Interface{
		l.LogMode(gormlogger.Silent),
		NewGormLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelError + 1})), GormLoggerConfig{}),
	} {
		quiet.Trace(ctx, time.Now().Add(-time.Hour), fc, errors.New("boom"))
	}
	if rendered != 1 || buf.Len() != 0 {
		t.Fatalf("a logger that logs nothing rendered or wrote: %d %q", rendered, buf.String())
	}
}

// BenchmarkGormLoggerTrace is the logger's cost for one successful,
// fast statement (the common case), against gorm's slog logger, which
// renders the statement with its values before deciding not to log it.
func BenchmarkGormLoggerTrace(b *testing.B) {
	sql := "INSERT INTO orders (tenant_id,id,version,status,body,create_fingerprint,fingerprint,created_at,updated_at) VALUES ($1,$2,$3,$4,$5,$6,$7,$8,$9) ON CONFLICT DO NOTHING"
	vars := []any{"acme", "6f1c1d2e-3a4b-4c5d-8e9f-0a1b2c3d4e5f", 1, "draft", `{"customer":"cus_1"}`, "v1:abc", "v1:abc", time.Now(), time.Now()}
	discard := slog.New(slog.DiscardHandler)
	for name, l := range map[string]gormlogger.Interface{
		"retrysafe": NewGormLogger(discard, GormLoggerConfig{}),
		"gorm-slog": gormlogger.NewSlogLogger(discard, gormlogger.Config{SlowThreshold: time.Second, LogLevel: gormlogger.Warn}),
	} {
		b.Run(name, func(b *testing.B) {
			ctx := context.Background()
			b.ReportAllocs()
			for b.Loop() {
				l.Trace(ctx, time.Now(), func() (string, int64) {
					s, v := sql, vars
					if f, ok := l.(gorm.ParamsFilter); ok {
						s, v = f.ParamsFilter(ctx, s, v...)
					}
					return gormlogger.ExplainSQL(s, numericPlaceholder, `'`, v...), 1
				}, nil)
			}
		})
	}
}

var numericPlaceholder = regexp.MustCompile(`\$(\d+)\$?`)
