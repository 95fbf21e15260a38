package storepg_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"testing"

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
