// Package api holds the OpenAI wire shapes several packages share: the error
// body and the one place that renders errors, JSON request decoding with its
// limits, and the list envelope.
package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Error types, as OpenAI names them.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeServer         = "server_error"
	TypeRequests       = "requests"
	TypeTokens         = "tokens"
)

// Error is an error with its HTTP rendering. Handlers and services return it
// (possibly wrapped); WriteError renders it. Err, the cause, is logged, never sent.
type Error struct {
	Status     int
	Type       string
	Code       string
	Param      string
	Message    string
	RetryAfter time.Duration // sent as Retry-After on 429 and 503 when > 0
	Err        error
	// Quiet: the refusal was logged where it arose (load shed by design,
	// logged there at a bounded rate), so WriteError does not log it again.
	Quiet bool
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%d %s: %s: %v", e.Status, e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%d %s: %s", e.Status, e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Body is the JSON error body: {"error":{"message","type","param","code"}}.
type Body struct {
	Error Detail `json:"error"`
}

// Detail is the inside of Body. Param and Code are null when empty.
type Detail struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    *string `json:"code"`
}

// Body returns the wire form of e.
func (e *Error) Body() Body {
	d := Detail{Message: e.Message, Type: e.Type}
	if e.Param != "" {
		d.Param = &e.Param
	}
	if e.Code != "" {
		d.Code = &e.Code
	}
	return Body{Error: d}
}

func newError(status int, typ, code, param, format string, args ...any) *Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &Error{Status: status, Type: typ, Code: code, Param: param, Message: msg}
}

// InvalidValue is a 400 for a parameter with a bad value.
func InvalidValue(param, format string, args ...any) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, "invalid_value", param, format, args...)
}

// MissingParam is a 400 for a required parameter that is absent.
func MissingParam(param string) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, "missing_required_parameter", param,
		"Missing required parameter: '%s'.", param)
}

// InvalidJSON is a 400 for a body that is not the JSON expected.
func InvalidJSON(format string, args ...any) *Error {
	return newError(http.StatusBadRequest, TypeInvalidRequest, "invalid_json", "", format, args...)
}

// Unauthorized is a 401: no key, or an unknown, expired or deleted one.
func Unauthorized(format string, args ...any) *Error {
	return newError(http.StatusUnauthorized, TypeInvalidRequest, "invalid_api_key", "", format, args...)
}

// Forbidden is a 403: the key is valid but may not do this.
func Forbidden(format string, args ...any) *Error {
	return newError(http.StatusForbidden, TypeInvalidRequest, "permission_denied", "", format, args...)
}

// NotFound is a 404 for an unknown route or id, or another team's resource.
func NotFound(format string, args ...any) *Error {
	return newError(http.StatusNotFound, TypeInvalidRequest, "not_found", "", format, args...)
}

// ModelNotFound is a 404 for a model the gateway does not serve.
func ModelNotFound(model string) *Error {
	return newError(http.StatusNotFound, TypeInvalidRequest, "model_not_found", "model",
		"The model '%s' does not exist or is not configured on this gateway.", model)
}

// MethodNotAllowed is a 405 for a known path with the wrong method.
func MethodNotAllowed(method, path string) *Error {
	return newError(http.StatusMethodNotAllowed, TypeInvalidRequest, "method_not_allowed", "",
		"Method %s is not allowed on %s.", method, path)
}

// RequestTimeout is a 408: the request's body did not arrive in time.
func RequestTimeout(format string, args ...any) *Error {
	return newError(http.StatusRequestTimeout, TypeInvalidRequest, "request_timeout", "", format, args...)
}

// Conflict is a 409: the request conflicts with the resource's state.
func Conflict(format string, args ...any) *Error {
	return newError(http.StatusConflict, TypeInvalidRequest, "conflict", "", format, args...)
}

// TooLarge is a 413: a body or file over a limit.
func TooLarge(format string, args ...any) *Error {
	return newError(http.StatusRequestEntityTooLarge, TypeInvalidRequest, "payload_too_large", "", format, args...)
}

// RateLimited is a 429; typ is TypeRequests or TypeTokens.
func RateLimited(typ string, retryAfter time.Duration, format string, args ...any) *Error {
	e := newError(http.StatusTooManyRequests, typ, "rate_limit_exceeded", "", format, args...)
	e.RetryAfter = retryAfter
	return e
}

// Internal is a 500: a sluice fault. The cause is logged, not sent.
func Internal(err error) *Error {
	e := newError(http.StatusInternalServerError, TypeServer, "internal_error", "",
		"The server had an error while processing your request.")
	e.Err = err
	return e
}

// Upstream is a 502: the provider failed or refused sluice's credential.
func Upstream(err error, format string, args ...any) *Error {
	e := newError(http.StatusBadGateway, TypeServer, "upstream_error", "", format, args...)
	e.Err = err
	return e
}

// Unavailable is a 503: something needed is not configured or not answering.
func Unavailable(format string, args ...any) *Error {
	return newError(http.StatusServiceUnavailable, TypeServer, "unavailable", "", format, args...)
}

// UpstreamTimeout is a 504: the provider did not answer in time.
func UpstreamTimeout(err error, format string, args ...any) *Error {
	e := newError(http.StatusGatewayTimeout, TypeServer, "upstream_timeout", "", format, args...)
	e.Err = err
	return e
}

// AsError classifies any error as an *Error. Errors that are not already one
// become 499 (a cancelled call: the client left), 503 (a store that did not
// answer), 413 (a body over its limit) or 500.
func AsError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var tooLarge *http.MaxBytesError
	switch {
	case errors.Is(err, context.Canceled):
		return ClientClosed(err)
	case errors.As(err, &tooLarge):
		return TooLarge("Request body is larger than the limit of %d bytes.", tooLarge.Limit)
	case errors.Is(err, store.ErrUnavailable):
		u := Unavailable("A storage service did not answer; try again.")
		u.Err = err
		return u
	}
	return Internal(err)
}

// WriteError renders err as the OpenAI error body with its status. It is the
// one place errors become responses. Server faults are logged with their
// cause; a client that has gone (ClientGone) is logged at info as a 499 and
// sent nothing.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	WriteErrorAs(w, r, err, func(e *Error) any { return e.Body() })
}

// WriteErrorAs is WriteError with the body another API's error shape
// (Anthropic's, on /v1/messages): body renders the classified error.
func WriteErrorAs(w http.ResponseWriter, r *http.Request, err error, body func(*Error) any) {
	if e := prepareError(w, r, err); e != nil {
		WriteJSON(w, e.Status, body(e))
	}
}

// prepareError logs err as WriteError does and sets the headers every
// rendering of it carries; it returns the error to render, or nil when the
// client has gone and nothing is sent.
func prepareError(w http.ResponseWriter, r *http.Request, err error) *Error {
	ctx := r.Context()
	e := AsError(ClientGone(ctx, err))
	switch {
	case e.Status == StatusClientClosed:
		logClientClosed(r, err)
		return nil // nobody reads the answer
	case e.Quiet:
	case e.Status >= 500:
		slog.ErrorContext(ctx, "request failed", "status", e.Status, "code", e.Code,
			"method", r.Method, "path", r.URL.Path, "error", err)
	case e.Status != http.StatusNotFound && e.Status != http.StatusUnauthorized:
		slog.InfoContext(ctx, "request refused", "status", e.Status, "code", e.Code,
			"method", r.Method, "path", r.URL.Path, "reason", e.Message)
	}
	if e.Status == http.StatusUnauthorized {
		// A client without a valid key gets no keep-alive: idle sockets
		// held by anyone would otherwise take the connection slots of
		// those with one. (HTTP/2 turns it into a graceful GOAWAY.)
		w.Header().Set("Connection", "close")
	}
	if e.RetryAfter > 0 {
		secs := int64((e.RetryAfter + time.Second - 1) / time.Second)
		w.Header().Set("Retry-After", strconv.FormatInt(secs, 10))
	}
	return e
}

// LogLateError logs an error that happened after the response began, when
// it can no longer be rendered: a client that has gone at info, as a 499.
func LogLateError(r *http.Request, err error) {
	if AsError(ClientGone(r.Context(), err)).Status == StatusClientClosed {
		logClientClosed(r, err)
		return
	}
	slog.WarnContext(r.Context(), "request failed after the response began",
		"method", r.Method, "path", r.URL.Path, "error", err)
}

func logClientClosed(r *http.Request, err error) {
	slog.InfoContext(r.Context(), "client closed request", "status", StatusClientClosed,
		"method", r.Method, "path", r.URL.Path, "error", err)
}
