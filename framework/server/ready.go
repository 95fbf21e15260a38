package server

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"
)

// DefaultReadinessTimeout bounds one readiness check when none is set.
const DefaultReadinessTimeout = 2 * time.Second

// Pinger is what [Readiness] checks: a *sql.DB (store.DB.SQL(), or
// gormDB.DB()) is one.
type Pinger interface {
	PingContext(ctx context.Context) error
}

// Readiness returns the handler of a readiness endpoint (/readyz): 200
// "ready" while db answers a ping within timeout (≤ 0 means
// [DefaultReadinessTimeout]), else 503 unavailable + Retry-After as a
// problem, so that a load balancer sends traffic elsewhere while the
// database is unreachable and back once it returns. It is not a liveness
// check: keep /healthz answering 200 while the process runs, so that an
// outage of the database does not get healthy processes restarted. Failed
// checks are logged at Warn on logger (nil: not logged).
func Readiness(db Pinger, timeout time.Duration, logger *slog.Logger) http.Handler {
	if timeout <= 0 {
		timeout = DefaultReadinessTimeout
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), timeout)
		defer cancel()
		if err := db.PingContext(ctx); err != nil {
			framework.WriteProblem(w, r, logger, &framework.Error{Code: wire.CodeUnavailable, Detail: "the database is unreachable",
				Err: fmt.Errorf("readiness: %w", err)})
			return
		}
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("ready\n"))
	})
}
