package models

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
)

// maxErrorBody bounds how much of a provider's error answer is read.
const maxErrorBody = 64 << 10

// ProviderError is a provider's answer other than 2xx.
type ProviderError struct {
	Provider   string
	Status     int
	Message    string // the provider's message, if it gave one
	Type       string
	Code       string
	Param      string
	RetryAfter time.Duration // from Retry-After / retry-after-ms; 0 when absent
}

func (e *ProviderError) Error() string {
	return fmt.Sprintf("%s answered %d: %s", e.Provider, e.Status, e.Message)
}

// ReadProviderError reads and closes a non-2xx answer and returns it as a
// *ProviderError. It understands OpenAI's error body ({"error":{"message",
// "type","param","code"}}) and the shapes OpenAI-compatible servers use
// ({"error":"..."}, {"message":"..."}, {"detail":"..."}).
func ReadProviderError(provider string, resp *http.Response) *ProviderError {
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &ProviderError{Provider: provider, Status: resp.StatusCode, RetryAfter: RetryAfter(resp.Header, time.Now())}
	var b struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Detail  json.RawMessage `json:"detail"`
		Type    string          `json:"type"`
	}
	if json.Unmarshal(body, &b) == nil {
		var d struct {
			Message string          `json:"message"`
			Type    string          `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    json.RawMessage `json:"code"`
		}
		var s string
		switch {
		case json.Unmarshal(b.Error, &d) == nil && d.Message != "":
			e.Message, e.Type = d.Message, d.Type
			e.Code, e.Param = jsonString(d.Code), jsonString(d.Param)
		case json.Unmarshal(b.Error, &s) == nil && s != "":
			e.Message = s
		case b.Message != "":
			e.Message, e.Type = b.Message, b.Type
		case json.Unmarshal(b.Detail, &s) == nil && s != "":
			e.Message = s
		}
	}
	if e.Message == "" {
		e.Message = strings.TrimSpace(string(body))
		if e.Message == "" || !json.Valid(body) && strings.ContainsAny(e.Message, "<>") {
			e.Message = http.StatusText(resp.StatusCode) // an HTML error page says nothing useful
		}
	}
	e.Message = truncate(e.Message, 1000)
	return e
}

// jsonString returns a JSON string's value; numbers and null give "".
func jsonString(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

// RetryAfter reads how long a provider asks callers to wait: retry-after-ms
// (OpenAI, Azure), then Retry-After in seconds or as an HTTP date. 0 when
// absent or unreadable.
func RetryAfter(h http.Header, now time.Time) time.Duration {
	if v := h.Get("Retry-After-Ms"); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms > 0 {
			return time.Duration(ms * float64(time.Millisecond))
		}
	}
	v := h.Get("Retry-After")
	if v == "" {
		return 0
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s <= 0 {
			return 0
		}
		return time.Duration(s * float64(time.Second))
	}
	if t, err := http.ParseTime(v); err == nil && t.After(now) {
		return t.Sub(now)
	}
	return 0
}

// failure is how the router treats an error from an attempt.
type failure int

const (
	// failFatal: the request itself is at fault (a provider 4xx about it);
	// another deployment would answer the same. Returned at once.
	failFatal failure = iota
	// failRetry: the deployment failed (429, 5xx, timeout, connection):
	// retry, on it or another.
	failRetry
	// failDeployment: this deployment cannot serve (credential refused,
	// none configured, call not supported): try the others, not it again.
	failDeployment
)

func classify(err error) failure {
	var pe *ProviderError
	if errors.As(err, &pe) {
		switch {
		case pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden:
			return failDeployment
		case pe.Status == http.StatusTooManyRequests || pe.Status == http.StatusRequestTimeout || pe.Status >= 500:
			return failRetry
		}
		return failFatal
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		if ae.Status >= 400 && ae.Status < 500 && ae.Status != http.StatusTooManyRequests {
			// A provider that cannot honour the request as asked (a
			// parameter its model does not take): the request's fault, as
			// the provider's own 400 would be. No retry, no cooldown.
			return failFatal
		}
		return failDeployment // the deployment cannot serve: no credential, no token
	}
	return failRetry // transport: timeout or connection
}

// isTimeout reports whether a transport error is a timeout.
func isTimeout(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// clientError turns an attempt's error into the error the client sees. It
// never carries sluice's credential or the provider's text about it.
func clientError(err error, t Target) error {
	var pe *ProviderError
	if errors.As(err, &pe) {
		switch {
		case pe.Status == http.StatusUnauthorized || pe.Status == http.StatusForbidden:
			return api.Upstream(err, "The provider refused the gateway's credential for model '%s' (HTTP %d); the gateway's operator must fix the deployment's api_key.", t.ModelGroup, pe.Status)
		case pe.Status == http.StatusTooManyRequests:
			typ := pe.Type
			if typ != api.TypeTokens {
				typ = api.TypeRequests
			}
			// Not the provider's text: it can name sluice's account
			// (OpenAI's says "in organization org-…"). The log keeps it.
			e := api.RateLimited(typ, pe.RetryAfter, "The provider is rate limiting model '%s'; retry later.", t.ModelGroup)
			e.Err = err
			return e
		case pe.Status == http.StatusRequestTimeout:
			return api.UpstreamTimeout(err, "The provider timed out on model '%s'.", t.ModelGroup)
		case pe.Status >= 500:
			return api.Upstream(err, "The provider failed on model '%s' (HTTP %d).", t.ModelGroup, pe.Status)
		case pe.Status >= 400:
			typ := pe.Type
			if typ == "" || typ == api.TypeServer {
				typ = api.TypeInvalidRequest
			}
			return &api.Error{Status: pe.Status, Type: typ, Code: pe.Code, Param: pe.Param, Message: pe.Message, Err: err}
		}
		return api.Upstream(err, "The provider gave an unexpected answer on model '%s' (HTTP %d).", t.ModelGroup, pe.Status)
	}
	var ae *api.Error
	if errors.As(err, &ae) {
		return err
	}
	if isTimeout(err) {
		return api.UpstreamTimeout(err, "The provider did not answer model '%s' in time.", t.ModelGroup)
	}
	return api.Upstream(err, "The gateway could not reach the provider of model '%s'.", t.ModelGroup)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
