package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/retrysafe/retrysafe/framework"
	"github.com/retrysafe/retrysafe/wire"

	"github.com/gin-gonic/gin"
)

// Defaults of [Config] and [Deadline].
const (
	DefaultRequestDeadline   = 10 * time.Second
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 15 * time.Second
	DefaultWriteTimeout      = 15 * time.Second
	DefaultIdleTimeout       = 60 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// Config holds the connection limits of an HTTP server for a
// retrysafe API. The zero value is ready to use; [New] fills in the
// defaults.
type Config struct {
	// ReadHeaderTimeout bounds reading a request's headers. Defaults to 5s.
	ReadHeaderTimeout time.Duration
	// ReadTimeout bounds reading a whole request, headers and body: a
	// client that declares a body and sends it slowly, or never, loses its
	// connection. Defaults to 15s.
	ReadTimeout time.Duration
	// WriteTimeout bounds the time from the end of the request headers to
	// the end of the response. Keep it above the request deadline
	// ([Deadline]) so that a 503 written at the deadline still goes out.
	// Defaults to 15s.
	WriteTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that sends no next request
	// for this long. Defaults to 60s.
	IdleTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers. Defaults to
	// 64 KiB.
	MaxHeaderBytes int
}

// New returns an *http.Server serving h behind [Framing] with the limits
// of cfg, so that slow or idle clients cannot hold connections (and file
// descriptors) for ever and no request runs hidden in another's body. Set
// Addr on it, or pass a listener to Serve. Negative settings are an error.
func New(h http.Handler, cfg Config) (*http.Server, error) {
	if h == nil {
		return nil, errors.New("server: New needs a handler")
	}
	if cfg.ReadHeaderTimeout < 0 || cfg.ReadTimeout < 0 || cfg.WriteTimeout < 0 || cfg.IdleTimeout < 0 || cfg.MaxHeaderBytes < 0 {
		return nil, errors.New("server: Config settings must not be negative")
	}
	or := func(d, def time.Duration) time.Duration {
		if d == 0 {
			return def
		}
		return d
	}
	if cfg.MaxHeaderBytes == 0 {
		cfg.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	return &http.Server{
		Handler:           Framing(h),
		ReadHeaderTimeout: or(cfg.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       or(cfg.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      or(cfg.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       or(cfg.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    cfg.MaxHeaderBytes,
	}, nil
}

// Deadline is gin middleware that gives every request a deadline of d
// (d ≤ 0 means [DefaultRequestDeadline]). Every database call and provider
// call of the request runs under it, so a database that does not answer (a
// partition, not a refusal) makes the request fail with 503 unavailable +
// Retry-After by then instead of hanging. The context's cause is then
// [ErrRequestDeadline]. Mount it first.
func Deadline(d time.Duration) gin.HandlerFunc {
	if d <= 0 {
		d = DefaultRequestDeadline
	}
	return func(c *gin.Context) {
		ctx, cancel := context.WithTimeoutCause(c.Request.Context(), d, framework.ErrRequestDeadline)
		defer cancel()
		c.Request = c.Request.WithContext(ctx)
		c.Next()
	}
}

// Detach returns a context that carries ctx's values and deadline but is
// not canceled when ctx is: work that must finish what it started although
// the client went away (a phased attempt) uses it, and stays bounded. When
// ctx has no deadline, the detached context gets one fallback from now.
// Its cause, when the deadline expires, is [ErrRequestDeadline].
func Detach(ctx context.Context, fallback time.Duration) (context.Context, context.CancelFunc) {
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(fallback)
	}
	return context.WithDeadlineCause(context.WithoutCancel(ctx), deadline, framework.ErrRequestDeadline)
}

// StorableText is gin middleware that answers 400 for a request whose path
// parameters or query values hold text a database cannot store (NUL, invalid
// UTF-8): invalid_resource_id for a path parameter, validation_failed for a
// query value. Such a value can name no stored resource, and passed on it
// would make PostgreSQL fail the statement (SQLSTATE 22021), a 500. Request
// bodies get the same check in [Bind].
func StorableText() gin.HandlerFunc {
	return func(c *gin.Context) {
		for _, p := range c.Params {
			if !storable(p.Value) {
				framework.WriteProblem(c.Writer, c.Request, nil, framework.Errorf(wire.CodeInvalidResourceID, "the %s path parameter is not valid text", p.Key))
				c.Abort()
				return
			}
		}
		if c.Request.URL.RawQuery != "" {
			for name, values := range c.Request.URL.Query() {
				ok := storable(name)
				for _, v := range values {
					ok = ok && storable(v)
				}
				if !ok {
					field := strings.ToValidUTF8(strings.ReplaceAll(name, "\x00", ""), "")
					framework.WriteProblem(c.Writer, c.Request, nil, &framework.Error{Code: wire.CodeValidationFailed, Detail: "a query parameter is not valid text",
						Fields: []wire.FieldError{{Field: field, Reason: "must be valid UTF-8 without NUL characters"}}})
					c.Abort()
					return
				}
			}
		}
		c.Next()
	}
}

// Storable reports whether s is text every database of the store keeps as
// it is: valid UTF-8 without NUL characters.
func Storable(s string) bool { return storable(s) }

// storable reports whether s is text PostgreSQL and SQLite both store.
func storable(s string) bool {
	return utf8.ValidString(s) && strings.IndexByte(s, 0) < 0
}

// closeWithoutReading makes the server close the connection after the
// response and stop waiting for the request body: a request refused before
// its body matters (no or a bad token) cannot hold the connection by
// declaring a body and never sending it.
func closeWithoutReading(w http.ResponseWriter) {
	w.Header().Set("Connection", "close")
	_ = http.NewResponseController(w).SetReadDeadline(time.Now())
}
