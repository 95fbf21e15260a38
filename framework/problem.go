package framework

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/retrysafe/retrysafe/framework/store"
)

// ContentTypeProblem is the media type of RFC 9457 problem details.
const ContentTypeProblem = "application/problem+json"

// Problem is the RFC 9457 body of every error response.
type Problem struct {
	Type   string       `json:"type"`
	Title  string       `json:"title"`
	Status int          `json:"status"`
	Detail string       `json:"detail,omitempty"`
	Code   Code         `json:"code"`
	Errors []FieldError `json:"errors,omitempty"`
}

// retryAfterDefault is sent with request_in_progress and unavailable
// responses that do not set their own.
const retryAfterDefault = time.Second

// ErrorFor maps any error to the *Error a client sees. This is the one place
// that decides it: an *Error in the chain wins; a lock timeout is
// request_in_progress; an unreachable database or an expired deadline is
// unavailable; anything else is internal, its cause kept for the log only.
func ErrorFor(err error) *Error {
	if e, ok := AsError(err); ok {
		if e.RetryAfter == 0 && (e.Code == CodeRequestInProgress || e.Code == CodeOutcomePending || e.Code == CodeUnavailable) {
			copied := *e
			copied.RetryAfter = retryAfterDefault
			return &copied
		}
		return e
	}
	switch {
	case errors.Is(err, store.ErrLockTimeout):
		return &Error{Code: CodeRequestInProgress, Detail: "a request with the same identity is being executed; retry shortly", RetryAfter: retryAfterDefault, Err: err}
	case errors.Is(err, store.ErrUnavailable), errors.Is(err, context.DeadlineExceeded):
		return &Error{Code: CodeUnavailable, Detail: "the database is unavailable; retry with the same ID or key", RetryAfter: retryAfterDefault, Err: err}
	}
	return &Error{Code: CodeInternal, Detail: "an internal error occurred", Err: err}
}

// RenderProblem returns the status, headers and body of the problem response
// for err. The POST fallback stores exactly these bytes for replay.
func RenderProblem(err error) (int, http.Header, []byte) {
	e := ErrorFor(err)
	status := e.Code.Status()
	body, _ := json.Marshal(Problem{
		Type:   "urn:retrysafe:problem:" + string(e.Code),
		Title:  e.Code.Title(),
		Status: status,
		Detail: e.Detail,
		Code:   e.Code,
		Errors: e.Fields,
	})
	h := http.Header{}
	h.Set("Content-Type", ContentTypeProblem)
	if e.RetryAfter > 0 {
		h.Set("Retry-After", strconv.Itoa(int((e.RetryAfter+time.Second-1)/time.Second)))
	}
	return status, h, body
}

// WriteProblem writes the problem response for err. Server errors are
// logged with their cause; the client sees only the generic detail.
func WriteProblem(w http.ResponseWriter, r *http.Request, logger *slog.Logger, err error) {
	status, h, body := RenderProblem(err)
	if status >= 500 && logger != nil {
		level := slog.LevelError
		if status == http.StatusServiceUnavailable {
			level = slog.LevelWarn
		}
		logger.LogAttrs(r.Context(), level, "request failed",
			slog.String("method", r.Method), slog.String("path", r.URL.Path),
			slog.Int("status", status), slog.String("error", store.RedactError(err)))
	}
	for k, v := range h {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}
