package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/cenkalti/backoff/v5"

	"github.com/retrysafe/retrysafe/cmd/demo/app"
	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/framework/server"
	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/wire"
)

// Backoff between attempts to connect to the database and migrate it at
// start-up: exponential from connectRetryInitial, at most
// connectRetryMax apart, with ±50% jitter, for as long as it takes (until
// the process is stopped).
const (
	connectRetryInitial = 200 * time.Millisecond
	connectRetryMax     = 5 * time.Second
)

// The lines the demo prints on stdout at start-up: waitingLine when the
// first attempt to connect to the database fails, then readyLine and the
// base URL once it serves (internal/demoproc.ListeningPrefix).
const (
	waitingLine = "retrysafe demo waiting for the database"
	readyLine   = "retrysafe demo listening on"
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
	framework.WriteProblem(w, r, nil, &framework.Error{Code: wire.CodeUnavailable,
		Detail: "the service is starting: its database is not connected yet; retry shortly"})
}

// connectApp builds the app (connect to the database, apply migrations),
// retrying with backoff until it succeeds or ctx ends. A DSN or database
// the framework can never use is not retried. waiting is called once,
// when the first attempt fails.
func connectApp(ctx context.Context, cfg app.Config, logger *slog.Logger, waiting func()) (*app.App, error) {
	var once sync.Once
	return backoff.Retry(ctx, func() (*app.App, error) {
		a, err := app.New(ctx, cfg)
		if errors.Is(err, store.ErrUnknownDSN) || errors.Is(err, store.ErrMisconfigured) {
			return nil, backoff.Permanent(err)
		}
		return a, err
	}, startupRetry(func(err error, next time.Duration) {
		once.Do(waiting)
		logger.LogAttrs(ctx, slog.LevelWarn, "database not ready, retrying",
			slog.Duration("retry_in", next), slog.String("error", store.RedactError(err)))
	})...)
}

// awaitReady returns once the service's own /readyz, asked through its
// listener at addr, answers 200, retrying with backoff until then or
// until ctx ends: the ready line says what a load balancer would see.
func awaitReady(ctx context.Context, addr net.Addr, logger *slog.Logger) error {
	client := &http.Client{Transport: &http.Transport{}, Timeout: 2 * server.DefaultReadinessTimeout} // no proxy
	defer client.CloseIdleConnections()
	url := "http://" + addr.String() + "/readyz"
	_, err := backoff.Retry(ctx, func() (struct{}, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
		if err != nil {
			return struct{}{}, backoff.Permanent(err)
		}
		res, err := client.Do(req)
		if err != nil {
			return struct{}{}, err
		}
		_, _ = io.Copy(io.Discard, res.Body)
		_ = res.Body.Close()
		if res.StatusCode != http.StatusOK {
			return struct{}{}, fmt.Errorf("/readyz answered %d", res.StatusCode)
		}
		return struct{}{}, nil
	}, startupRetry(func(err error, next time.Duration) {
		logger.LogAttrs(ctx, slog.LevelWarn, "not ready yet, retrying", slog.Duration("retry_in", next), slog.String("error", err.Error()))
	})...)
	return err
}

// startupRetry is the backoff of the start-up's waits, for as long as it
// takes (until the process is stopped), with notify told of each failed
// attempt.
func startupRetry(notify backoff.Notify) []backoff.RetryOption {
	b := backoff.NewExponentialBackOff()
	b.InitialInterval, b.MaxInterval = connectRetryInitial, connectRetryMax
	return []backoff.RetryOption{backoff.WithBackOff(b), backoff.WithMaxElapsedTime(0), backoff.WithNotify(notify)}
}
