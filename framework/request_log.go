package framework

import (
	"context"
	"log/slog"
)

// requestLevelHandler logs the Info records of the engine's logger at
// level instead ([EngineConfig.RequestLogLevel]); records of every other
// level pass as they are, so failures (Warn, Error) are always logged.
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
