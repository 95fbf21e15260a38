package store

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
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
