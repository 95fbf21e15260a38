package framework

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
	"github.com/retrysafe/retrysafe/framework/telemetry"
	"github.com/retrysafe/retrysafe/wire"
)

// retryAfterDefault is the Retry-After of a retryable answer whose error
// sets none.
const retryAfterDefault = time.Second

// ErrorFor maps any error to the *Error a client sees: an *Error in the
// chain wins; a lock timeout on the request's own key (its resource's row,
// its idempotency record: [store.ErrKeyLocked]) is request_in_progress; any
// other lock timeout (a lock that another key's transaction, or another
// writer of SQLite, holds), an unreachable database or an expired
// deadline is unavailable; anything else is internal, its cause kept for
// the log only. Status, title and Retry-After come from the code registry
// when the problem is rendered.
func ErrorFor(err error) *Error {
	if e, ok := AsError(err); ok {
		return e
	}
	err = store.Classify(err)
	switch {
	case errors.Is(err, store.ErrKeyLocked):
		return &Error{Code: wire.CodeRequestInProgress, Detail: "a request with the same identity is being executed; retry shortly", Err: err}
	case errors.Is(err, store.ErrLockTimeout):
		return &Error{Code: wire.CodeUnavailable, Detail: "the database is busy: a lock that another transaction holds was not released in time; retry shortly", Err: err}
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: wire.CodeUnavailable, Detail: "the database is unavailable; retry shortly", Err: err}
	case errors.Is(err, store.ErrUnstorableText):
		// Whatever statement carried it (a filter, a path value, a field
		// of a resource's own query): the request cannot succeed as it is.
		return &Error{Code: wire.CodeValidationFailed, Detail: "a text value holds a character that cannot be stored",
			Fields: []wire.FieldError{{Field: "", Reason: "valid UTF-8 without NUL characters"}}, Err: err}
	}
	return &Error{Code: wire.CodeInternal, Detail: "an internal error occurred", Err: err}
}

// renderProblem is the one mapping from an error to an HTTP status, headers
// and an RFC 9457 body. codes decides status, title and retryability; a
// code it does not know is a server bug and answers 500 (declarations such
// as postkeys.Register refuse unregistered codes, so a correctly wired
// service never gets there). Exactly the retryable codes carry Retry-After;
// a 401 carries WWW-Authenticate: Bearer.
func renderProblem(codes *Codes, err error) (int, http.Header, []byte, *Error) {
	e := ErrorFor(err)
	info, ok := codes.Lookup(e.Code)
	if !ok {
		e = &Error{Code: wire.CodeInternal, Detail: "an internal error occurred",
			Err: fmt.Errorf("unregistered problem code %q: %w", e.Code, err)}
		info, _ = codes.Lookup(wire.CodeInternal)
	}
	body, _ := json.Marshal(wire.Problem{
		Type:   wire.ProblemType(e.Code),
		Title:  info.Title,
		Status: info.Status,
		Detail: e.Detail,
		Code:   e.Code,
		Errors: e.Fields,
	})
	h := http.Header{}
	h.Set(wire.HeaderContentType, wire.ContentTypeProblem)
	if info.Retryable {
		after := e.RetryAfter
		if after <= 0 {
			after = retryAfterDefault
		}
		h.Set(wire.HeaderRetryAfter, strconv.Itoa(int((after+time.Second-1)/time.Second)))
	}
	if info.Status == http.StatusUnauthorized {
		h.Set(wire.HeaderWWWAuthenticate, "Bearer")
	}
	return info.Status, h, body, e
}

// RenderProblem returns the status, headers and body of the problem response
// for err under the engine's codes. The POST fallback stores exactly these
// bytes for replay.
func (e *Engine) RenderProblem(err error) (int, http.Header, []byte) {
	status, h, body, _ := renderProblem(e.codes, err)
	return status, h, body
}

// WriteProblem writes the problem response for err under the engine's
// codes. Server errors are logged with their cause; the client sees only
// the generic detail.
func (e *Engine) WriteProblem(w http.ResponseWriter, r *http.Request, err error) {
	writeProblem(w, r, e.logger, e.codes, err)
}

// RenderProblem is [Engine.RenderProblem] under the codes of c, for code
// that renders a registered business code without an engine (the
// operator's resolution of a record, postkeys.Resolve).
func (c *Codes) RenderProblem(err error) (int, http.Header, []byte) {
	status, h, body, _ := renderProblem(c, err)
	return status, h, body
}

// RenderProblem is [Engine.RenderProblem] for the generic codes only, for
// code that runs without an engine (authentication, unknown routes).
func RenderProblem(err error) (int, http.Header, []byte) {
	status, h, body, _ := renderProblem(nil, err)
	return status, h, body
}

// WriteProblem is [Engine.WriteProblem] for the generic codes only, for
// code that runs without an engine (authentication, unknown routes). An
// error with a business code must go through the engine that registered it.
func WriteProblem(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	writeProblem(w, r, logger, nil, err)
}

// WriteFailure answers a write of pattern ("put", "post", "legacy_post")
// on operation that failed with err: it counts the outcome in the
// engine's [telemetry.Metrics] (a problem's outcome: in_progress,
// key_reuse, missing_key, rejected, error; client_gone when the client
// went away), sets it on the request's span with the key's hash
// ([telemetry.TraceOutcome]; key may be empty) and writes the problem
// ([Engine.WriteProblem]). Both patterns answer their failures through it.
func (e *Engine) WriteFailure(w http.ResponseWriter, r *http.Request, pattern, operation, key string, err error) {
	outcome := outcomeOf(r.Context(), err)
	e.metrics.Requests.WithLabelValues(pattern, operation, outcome).Inc()
	telemetry.TraceOutcome(r.Context(), pattern, operation, outcome, key)
	e.WriteProblem(w, r, err)
}

// outcomeOf names the outcome of a write that failed with err; ctx is
// the request's.
func outcomeOf(ctx context.Context, err error) string {
	if telemetry.ClientGone(ctx) {
		return telemetry.OutcomeClientGone
	}
	switch ErrorFor(err).Code {
	case wire.CodeRequestInProgress, wire.CodeOutcomePending:
		return telemetry.OutcomeInProgress
	case wire.CodeIdempotencyKeyReuse:
		return telemetry.OutcomeKeyReuse
	case wire.CodeIdempotencyKeyMissing:
		return telemetry.OutcomeMissingKey
	case wire.CodeUnavailable, wire.CodeInternal:
		return telemetry.OutcomeError
	}
	return telemetry.OutcomeRejected
}

func writeProblem(w http.ResponseWriter, r *http.Request, logger *slog.Logger, codes *Codes, err error) {
	status, h, body, e := renderProblem(codes, err)
	if telemetry.ClientGone(r.Context()) {
		// The answer goes nowhere; the log says why the work stopped.
		if logger != nil {
			logger.LogAttrs(r.Context(), slog.LevelInfo, "client gone",
				slog.String("method", r.Method), slog.String("path", r.URL.Path),
				slog.String("error", store.RedactError(err)))
		}
	} else if status >= 500 && logger != nil {
		level := slog.LevelError
		if status == http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		cause := err
		if e.Err != nil && e.Code == wire.CodeInternal {
			cause = e.Err
		}
		logger.LogAttrs(r.Context(), level, "request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.String("error", store.RedactError(cause)))
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
