package postkeys_test

import (
	"context"
	"log"
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

// TestApplicationsGormLoggerSeesNoKeys: on the application's own
// *gorm.DB with gorm's default logger, set to report every statement as
// slow, the statements of a POST with an Idempotency-Key (the record's
// claim, read and completion, which carry the key in their WHERE), its
// replay and a local operation's reach the logger without the raw key and
// without a field value of the request.
func TestApplicationsGormLoggerSeesNoKeys(t *testing.T) {
	t.Parallel()
	testdb.Run(t, func(t *testing.T, dsn string) {
		logs := &testlog.Buffer{}
		slow := gormlogger.New(log.New(logs, "", 0), gormlogger.Config{SlowThreshold: time.Nanosecond, LogLevel: gormlogger.Warn})
		db, err := store.New(context.Background(), testdb.Gorm(t, dsn, &gorm.Config{Logger: slow}), store.Config{LockTimeout: 2 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		h := setupOn(t, db, nil)
		suffix := uuid.NewString()[:8]
		key, counterKey, name := "rawkey-"+suffix, "rawkey-counter-"+suffix, "secret-name-"+suffix
		first := h.post("/v1/widgets", tokenA, key, `{"name":"`+name+`"}`)
		wantStatus(t, first, http.StatusCreated)
		wantReplay(t, h.post("/v1/widgets", tokenA, key, `{"name":"`+name+`"}`), first)
		wantStatus(t, h.post("/v1/counters", tokenA, counterKey, `{"by":3}`), http.StatusOK)

		out := logs.String()
		if !strings.Contains(out, "SLOW SQL") || !strings.Contains(out, "idempotency_records") {
			t.Fatalf("the records' statements were not reported:\n%s", out)
		}
		for _, secret := range []string{key, counterKey, name} {
			if strings.Contains(out, secret) {
				t.Fatalf("%q is in the log of the application's gorm logger:\n%s", secret, out)
			}
		}
	})
}
