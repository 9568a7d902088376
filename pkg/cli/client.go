package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// maxErrorBody bounds the error body read from the API, and maxJSONBody a
// JSON answer decoded in memory (a list page, a batch).
const (
	maxErrorBody = 64 << 10
	maxJSONBody  = 32 << 20
)

// client talks to sluice's HTTP API: nothing else (ARCHITECTURE §12).
type client struct {
	base string // without a trailing slash
	key  string
	http *http.Client
}

func newClient(base, key string) *client {
	// No overall timeout: downloads and uploads stream for as long as they
	// take; connecting and waiting for headers are bounded.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.ResponseHeaderTimeout = 2 * time.Minute
	return &client{base: strings.TrimRight(base, "/"), key: key, http: &http.Client{Transport: tr}}
}

// apiError is an error the API answered with, in its own words.
type apiError struct {
	Status  int
	Message string
	Type    string
	Code    string
}

func (e *apiError) Error() string {
	msg := e.Message
	if msg == "" {
		msg = http.StatusText(e.Status)
	}
	return fmt.Sprintf("%s (HTTP %d)", msg, e.Status)
}

// hint is what the user can do about e, "" when nothing obvious.
func (e *apiError) hint() string {
	switch e.Status {
	case http.StatusUnauthorized:
		return "run sluice login (or set SLUICE_API_KEY) with a valid key"
	case http.StatusForbidden:
		return "this needs the master key, or a key of the team it concerns"
	case http.StatusTooManyRequests:
		return "a rate limit or budget was reached; wait and try again"
	}
	if e.Status >= 500 {
		return "the gateway failed; its logs say why"
	}
	return ""
}

// connError is a request that got no answer.
type connError struct {
	base string
	err  error
}

func (e *connError) Error() string { return fmt.Sprintf("cannot reach %s: %v", e.base, e.err) }
func (e *connError) Unwrap() error { return e.err }

// do sends a request and returns the answer when it is a 2xx; otherwise an
// *apiError (the body closed).
func (c *client) do(ctx context.Context, method, path string, body io.Reader, contentType string) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, body)
	if err != nil {
		return nil, fmt.Errorf("build request: %w", err)
	}
	if c.key != "" {
		req.Header.Set("Authorization", "Bearer "+c.key)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, &connError{base: c.base, err: err}
	}
	if resp.StatusCode/100 == 2 {
		return resp, nil
	}
	defer resp.Body.Close()
	raw, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	e := &apiError{Status: resp.StatusCode}
	var b struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &b) == nil {
		e.Message, e.Type = b.Error.Message, b.Error.Type
		if s, ok := b.Error.Code.(string); ok {
			e.Code = s
		}
		if e.Message == "" {
			e.Message = b.Message
		}
	}
	return nil, e
}

// call sends in (JSON-encoded, when not nil) and returns the raw JSON answer.
func (c *client) call(ctx context.Context, method, path string, in any) (json.RawMessage, error) {
	var body io.Reader
	ct := ""
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			return nil, fmt.Errorf("encode request: %w", err)
		}
		body, ct = bytes.NewReader(b), "application/json"
	}
	resp, err := c.do(ctx, method, path, body, ct)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody+1))
	if err != nil {
		return nil, &connError{base: c.base, err: err}
	}
	if len(raw) > maxJSONBody {
		return nil, fmt.Errorf("%s %s: the answer is larger than %d bytes", method, path, maxJSONBody)
	}
	if !json.Valid(raw) {
		return nil, fmt.Errorf("%s %s: the answer is not JSON: %.200s", method, path, raw)
	}
	return raw, nil
}

// callInto is call, decoding the answer into out.
func (c *client) callInto(ctx context.Context, method, path string, in, out any) (json.RawMessage, error) {
	raw, err := c.call(ctx, method, path, in)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(raw, out); err != nil {
		return nil, fmt.Errorf("%s %s: unexpected answer: %w", method, path, err)
	}
	return raw, nil
}

// query renders non-empty parameters as a query string ("" when none).
func query(kv ...string) string {
	v := url.Values{}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] != "" {
			v.Set(kv[i], kv[i+1])
		}
	}
	if len(v) == 0 {
		return ""
	}
	return "?" + v.Encode()
}

// isStatus reports whether err is an API answer with status.
func isStatus(err error, status int) bool {
	var e *apiError
	return errors.As(err, &e) && e.Status == status
}
