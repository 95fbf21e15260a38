package collection_test

import (
	"io"
	"log"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/internal/testdb"
	"github.com/retrysafe/retrysafe/internal/testlog"
)

// slowLoggers are gorm loggers an application may give its own *gorm.DB,
// each reporting every statement as slow: gorm's default one, and
// store.NewGormLogger configured so. The framework's statements must
// reach either without their parameter values.
var slowLoggers = map[string]func(io.Writer) gormlogger.Interface{
	"gorm's default logger": func(w io.Writer) gormlogger.Interface {
		return gormlogger.New(log.New(w, "", 0), gormlogger.Config{SlowThreshold: time.Nanosecond, LogLevel: gormlogger.Warn})
	},
	"store.NewGormLogger": func(w io.Writer) gormlogger.Interface {
		return store.NewGormLogger(slog.New(slog.NewJSONHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug})),
			store.GormLoggerConfig{SlowThreshold: time.Nanosecond})
	},
}

// TestApplicationsGormLoggerSeesNoValues: on the application's own
// *gorm.DB, a create and its replays (which insert first and find the ID
// taken: a unique violation the engine expects) reach the handle's gorm
// logger as slow statements without a field value of the request, and
// without an error.
func TestApplicationsGormLoggerSeesNoValues(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		for name, newLogger := range slowLoggers {
			logs := &testlog.Buffer{}
			h := setup(t, dsn, func(o *setupOptions) { o.own = &gorm.Config{Logger: newLogger(logs)} })
			customer := "cus_secret_" + uuid.NewString()[:8]
			id := uuid.New()
			for i := range 3 {
				wantStatus(t, h.do("PUT", invoicePath(id), "tok1", invoiceBody(customer, 7)), http.StatusCreated)
				if i == 0 {
					wantStatus(t, h.do("GET", invoicePath(id), "tok1", nil), http.StatusOK)
				}
			}
			out := logs.String()
			if !strings.Contains(out, "SLOW SQL") && !strings.Contains(out, "sql slow") {
				t.Fatalf("%s: no statement was reported:\n%s", name, out)
			}
			if strings.Contains(out, customer) || strings.Contains(out, "[error]") || strings.Contains(out, `"level":"ERROR"`) {
				t.Errorf("%s logged a field value or an error:\n%s", name, out)
			}
		}
	})
}
