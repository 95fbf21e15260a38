package telemetry

import (
	"context"
	"log/slog"
)

// RequestLogHandler returns a handler that passes the Info records to h
// at level instead: the events a request logs at Info (a resource write,
// an idempotency record's transitions, a legacy route used) and the
// janitor's summaries, so that slog.LevelDebug keeps them out of an Info
// log under load (framework.EngineConfig's RequestLogLevel). Records of
// every other level pass as they are, so failures (Warn, Error) are
// always logged. At slog.LevelInfo it returns h.
func RequestLogHandler(h slog.Handler, level slog.Level) slog.Handler {
	if level == slog.LevelInfo {
		return h
	}
	return requestLevelHandler{Handler: h, level: level}
}

// requestLevelHandler is [RequestLogHandler]'s.
type requestLevelHandler struct {
	slog.Handler
	level slog.Level
}

func (h requestLevelHandler) relevel(l slog.Level) slog.Level {
	if l == slog.LevelInfo {
		return h.level
	}
	return l
}

func (h requestLevelHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.Handler.Enabled(ctx, h.relevel(l))
}

func (h requestLevelHandler) Handle(ctx context.Context, r slog.Record) error {
	r.Level = h.relevel(r.Level)
	return h.Handler.Handle(ctx, r)
}

func (h requestLevelHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return requestLevelHandler{Handler: h.Handler.WithAttrs(attrs), level: h.level}
}

func (h requestLevelHandler) WithGroup(name string) slog.Handler {
	return requestLevelHandler{Handler: h.Handler.WithGroup(name), level: h.level}
}
