package store

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strings"
	"time"

	"gorm.io/gorm"
	gormlogger "gorm.io/gorm/logger"
)

// DefaultSlowThreshold is the duration above which [NewGormLogger] reports
// a statement as slow when its config sets none.
const DefaultSlowThreshold = time.Second

// GormLoggerConfig configures [NewGormLogger]. The zero value is ready to
// use.
type GormLoggerConfig struct {
	// Level is the most verbose gorm level reported: gormlogger.Silent,
	// Error (failed statements), Warn (also slow ones) or Info (every
	// statement). Defaults to gormlogger.Warn.
	Level gormlogger.LogLevel
	// SlowThreshold is the duration above which a statement is reported as
	// slow at Warn. Defaults to [DefaultSlowThreshold]; negative turns slow
	// reports off.
	SlowThreshold time.Duration
}

// gormLogger is gorm's logger for retrysafe. It reports failed and slow
// statements to a *slog.Logger without their parameter values, so that no
// idempotency key, token or request field reaches the log, and it does no
// work for a statement it will not report: the statement text is built only
// when a record is about to be written.
type gormLogger struct {
	logger *slog.Logger
	level  gormlogger.LogLevel
	slow   time.Duration
}

var (
	_ gormlogger.Interface = (*gormLogger)(nil)
	_ gorm.ParamsFilter    = (*gormLogger)(nil)
)

// NewGormLogger returns a gorm logger that writes to logger: failed
// statements at slog.LevelError, slow ones at slog.LevelWarn and, at
// gormlogger.Info, every statement at slog.LevelDebug. SQL is logged with
// its placeholders ($1, ?), never with the values bound to them; a database
// error is logged by its SQLSTATE or result code and a message whose quoted
// literals are masked. A record not found is not an error here, nor is a
// unique index's refusal of a row ([ErrUniqueViolation]), which the
// framework takes as an answer (a retried create finds its ID taken): it
// is logged at slog.LevelDebug as "sql conflict". Use it for a *gorm.DB of
// your own: gorm.Config{Logger: store.NewGormLogger(l, cfg)}.
func NewGormLogger(logger *slog.Logger, cfg GormLoggerConfig) gormlogger.Interface {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Level == 0 {
		cfg.Level = gormlogger.Warn
	}
	if cfg.SlowThreshold == 0 {
		cfg.SlowThreshold = DefaultSlowThreshold
	}
	return &gormLogger{logger: logger, level: cfg.Level, slow: cfg.SlowThreshold}
}

// LogMode implements gormlogger.Interface.
func (l *gormLogger) LogMode(level gormlogger.LogLevel) gormlogger.Interface {
	copied := *l
	copied.level = level
	return &copied
}

// Info, Warn and Error implement gormlogger.Interface. gorm passes them
// printf-style messages of its own (failed to initialize database, got
// error %v; migrations; replaced callbacks): they are formatted with the
// errors redacted ([RedactError]) and the strings (callback names, file
// positions) kept, and every other argument, which may be a value
// (migrator: "failed to parse value %#v"), shown as "…".
func (l *gormLogger) Info(ctx context.Context, msg string, args ...any) {
	l.message(ctx, gormlogger.Info, slog.LevelInfo, msg, args)
}

func (l *gormLogger) Warn(ctx context.Context, msg string, args ...any) {
	l.message(ctx, gormlogger.Warn, slog.LevelWarn, msg, args)
}

func (l *gormLogger) Error(ctx context.Context, msg string, args ...any) {
	l.message(ctx, gormlogger.Error, slog.LevelError, msg, args)
}

func (l *gormLogger) message(ctx context.Context, at gormlogger.LogLevel, level slog.Level, msg string, args []any) {
	if l.level < at || !l.logger.Enabled(ctx, level) {
		return
	}
	if len(args) > 0 {
		msg = fmt.Sprintf(msg, redactArgs(args)...)
	}
	l.logger.LogAttrs(ctx, level, "gorm", slog.String("message", strings.TrimSpace(msg)))
}

// redactArgs returns the arguments of one of gorm's printf-style messages
// as they may be shown: errors redacted ([RedactError]), strings (callback
// names, file positions) as they are, anything else as "…".
func redactArgs(args []any) []any {
	shown := make([]any, len(args))
	for i, a := range args {
		switch a := a.(type) {
		case error:
			shown[i] = redacted(RedactError(a))
		case string:
			shown[i] = a
		default:
			shown[i] = redacted("…")
		}
	}
	return shown
}

// redacted is text that prints as itself under any verb (%v, %#v, %d).
type redacted string

func (r redacted) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, string(r)) }

// ParamsFilter implements gorm.ParamsFilter: the statement gorm hands to
// Trace keeps its placeholders and drops the values.
func (l *gormLogger) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}

// Trace implements gormlogger.Interface. It decides whether to log from the
// error and the duration alone, and calls fc (which renders the statement)
// only then.
func (l *gormLogger) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	if l.level <= gormlogger.Silent {
		return
	}
	var (
		level slog.Level
		msg   string
	)
	switch {
	case err != nil && (errors.Is(err, context.Canceled) || errors.Is(ctx.Err(), context.Canceled)) && l.level >= gormlogger.Error:
		// Canceled by its caller (a client that went away): the statement
		// did not fail, the caller stopped waiting for it.
		level, msg = slog.LevelDebug, "sql canceled"
	case err != nil && conflict(err) && l.level >= gormlogger.Error:
		// A unique index refused the row: an answer the framework
		// expects (a retried create finding its ID taken), not a failure.
		level, msg = slog.LevelDebug, "sql conflict"
	case err != nil && !errors.Is(err, gorm.ErrRecordNotFound) && l.level >= gormlogger.Error:
		level, msg = slog.LevelError, "sql failed"
	case l.slow > 0 && l.level >= gormlogger.Warn && time.Since(begin) > l.slow:
		level, msg = slog.LevelWarn, "sql slow"
	case l.level >= gormlogger.Info:
		level, msg = slog.LevelDebug, "sql"
	default:
		return
	}
	if !l.logger.Enabled(ctx, level) {
		return
	}
	sql, rows := fc()
	attrs := []slog.Attr{
		slog.Duration("duration", time.Since(begin)),
		slog.String("sql", sql),
		slog.Int64("rows", rows),
	}
	if err != nil {
		attrs = append(attrs, slog.String("error", RedactError(err)))
	}
	l.logger.LogAttrs(ctx, level, msg, attrs...)
}

// conflict reports that err is a unique index's refusal of a row
// ([ErrUniqueViolation]), as a registered [Driver] classifies it.
func conflict(err error) bool { return errors.Is(Classify(err), ErrUniqueViolation) }

// valueless is an application's own gorm logger as [New] hands the
// framework's statements to it: without their parameter values (gorm
// renders a statement with the values a [gorm.ParamsFilter] returns,
// none), with the quoted literals of an error redacted ([RedactError]),
// and with a unique violation reported as no error (a retried create
// that finds its ID taken is an answer, not a failure). Everything else,
// its format, its levels and its slow threshold, is the application's.
type valueless struct{ gormlogger.Interface }

var _ gorm.ParamsFilter = valueless{}

// withoutValues returns l as [New] installs it on the framework's handle:
// itself when it is [NewGormLogger]'s, which logs no values of its own
// accord, else l wrapped in [valueless].
func withoutValues(l gormlogger.Interface) gormlogger.Interface {
	switch l.(type) {
	case nil, *gormLogger, valueless:
		return l
	}
	return valueless{l}
}

func (l valueless) LogMode(level gormlogger.LogLevel) gormlogger.Interface {
	return valueless{l.Interface.LogMode(level)}
}

func (l valueless) ParamsFilter(_ context.Context, sql string, _ ...any) (string, []any) {
	return sql, nil
}

func (l valueless) Info(ctx context.Context, msg string, args ...any) {
	l.Interface.Info(ctx, msg, redactArgs(args)...)
}

func (l valueless) Warn(ctx context.Context, msg string, args ...any) {
	l.Interface.Warn(ctx, msg, redactArgs(args)...)
}

func (l valueless) Error(ctx context.Context, msg string, args ...any) {
	l.Interface.Error(ctx, msg, redactArgs(args)...)
}

func (l valueless) Trace(ctx context.Context, begin time.Time, fc func() (string, int64), err error) {
	switch {
	case err == nil:
	case conflict(err):
		err = nil
	default:
		err = redactedError{err}
	}
	l.Interface.Trace(ctx, begin, fc, err)
}

// redactedError is err as a log may show it ([RedactError]); errors.Is
// and errors.As still see err.
type redactedError struct{ err error }

func (e redactedError) Error() string { return RedactError(e.err) }
func (e redactedError) Unwrap() error { return e.err }

// quoted matches the quoted literals of a database error message, where
// PostgreSQL puts the offending input value (invalid input syntax for type
// uuid: "…").
var quoted = regexp.MustCompile(`"[^"]*"|'[^']*'`)

// RedactError renders err for a log line without the values that database
// errors may quote: every quoted literal of the message ("…" or '…', where
// PostgreSQL puts the offending input) is replaced by "…". A PostgreSQL
// error's DETAIL, which repeats key values and whole rows, is never part of
// its message. The SQLSTATE and the rest of the message stay, which is what
// an operator needs.
func RedactError(err error) string {
	if err == nil {
		return ""
	}
	return quoted.ReplaceAllString(err.Error(), `"…"`)
}
