package storepg_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	gormlogger "gorm.io/gorm/logger"

	"github.com/retrysafe/retrysafe/framework/store"
)

// TestGormLoggerFormatsGormsMessages: gorm's own messages are printf
// formats ("failed to initialize database, got error %v", logged when
// Open cannot reach the database); the line shows the redacted error, never
// a bare verb, and a value argument only as "…".
func TestGormLoggerFormatsGormsMessages(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&buf, nil))
	// A port with nothing listening: Open's ping fails and gorm logs it.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	_, err = store.Open(context.Background(), "postgres://postgres@"+addr+"/x?sslmode=disable&connect_timeout=5", store.Config{Logger: logger})
	if err == nil {
		t.Fatal("Open succeeded on a port with nothing listening")
	}
	out := buf.String()
	if !strings.Contains(out, "failed to initialize database, got error") || strings.Contains(out, "%v") || !strings.Contains(out, "refused") {
		t.Fatalf("gorm's message was logged as %q", out)
	}

	buf.Reset()
	l := store.NewGormLogger(logger, store.GormLoggerConfig{Level: gormlogger.Info})
	l.Error(context.Background(), "failed to parse value %#v, got error %v", struct{ Secret string }{"secret-value"}, errors.New(`bad "secret-value"`))
	l.Warn(context.Background(), "removing callback `%s` from %s\n", "gorm:create", "x.go:1")
	out = buf.String()
	if strings.Contains(out, "secret-value") || strings.Contains(out, "%") ||
		!strings.Contains(out, "failed to parse value …, got error bad") || !strings.Contains(out, "removing callback `gorm:create` from x.go:1") {
		t.Fatalf("messages logged as %q", out)
	}
}

// TestGormLoggerConflictIsNotAnError: a statement that a unique index
// refused (a retried create finding its ID taken, which the framework
// expects) is logged at Debug as a conflict, never as a failed statement.
func TestGormLoggerConflictIsNotAnError(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	l := store.NewGormLogger(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), store.GormLoggerConfig{})
	dup := fmt.Errorf("exec: %w", &pgconn.PgError{Severity: "ERROR", Code: "23505", Message: "duplicate key value violates unique constraint \"orders_pkey\""})
	l.Trace(context.Background(), time.Now(), func() (string, int64) { return "INSERT INTO orders VALUES ($1)", 0 }, dup)
	out := buf.String()
	if strings.Contains(out, "level=ERROR") || !strings.Contains(out, "level=DEBUG") || !strings.Contains(out, "sql conflict") {
		t.Fatalf("a unique violation was logged as %q", out)
	}
}
