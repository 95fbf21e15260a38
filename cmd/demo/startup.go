package main

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/store"
)

// Backoff between attempts to connect to the database and migrate it at
// start-up: exponential from connectRetryInitial, at most
// connectRetryMax apart, with ±50% jitter, for as long as it takes (until
// the process is stopped).
const (
	connectRetryInitial = 200 * time.Millisecond
	connectRetryMax     = 5 * time.Second
)

// startingHandler serves while the database is not connected yet: /healthz
// answers 200 (the process is alive), every other path, /readyz included,
// 503 unavailable with Retry-After. Once ready is called it hands every
// request to the application.
type startingHandler struct {
	app atomic.Pointer[http.Handler]
}

func (s *startingHandler) ready(h http.Handler) { s.app.Store(&h) }

func (s *startingHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if h := s.app.Load(); h != nil {
		(*h).ServeHTTP(w, r)
		return
	}
	if r.URL.Path == "/healthz" {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = io.WriteString(w, "ok")
		return
	}
	framework.WriteProblem(w, r, nil, &framework.Error{Code: framework.CodeUnavailable,
		Detail: "the service is starting: its database is not connected yet; retry shortly"})
}

// connectApp builds the app (connect to the database, apply migrations),
// retrying with backoff until it succeeds or ctx ends. A DSN or database
// the framework can never use is not retried.
func connectApp(ctx context.Context, cfg app.Config, logger *slog.Logger) (*app.App, error) {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = connectRetryInitial, connectRetryMax
	return backoff.Retry(ctx, func() (*app.App, error) {
		a, err := app.New(ctx, cfg)
		if errors.Is(err, store.ErrUnknownDSN) || errors.Is(err, store.ErrMisconfigured) {
			return nil, backoff.Permanent(err)
		}
		return a, err
	}, backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0), backoff.WithNotify(func(err error, next time.Duration) {
		logger.LogAttrs(ctx, slog.LevelWarn, "database not ready, retrying",
			slog.Duration("retry_in", next), slog.String("error", store.RedactError(err)))
	}))
}
