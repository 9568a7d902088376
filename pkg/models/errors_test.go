package models

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

func TestReadProviderError(t *testing.T) {
	for _, tc := range []struct {
		name, body            string
		status                int
		msg, typ, code, param string
		header                http.Header
		retryAfter            time.Duration
	}{
		{name: "openai", status: 400,
			body: `{"error":{"message":"'$.input' is invalid.","type":"invalid_request_error","param":"input","code":null}}`,
			msg:  "'$.input' is invalid.", typ: "invalid_request_error", param: "input"},
		{name: "openai 429", status: 429,
			body:   `{"error":{"message":"Rate limit reached for text-embedding-3-small","type":"requests","param":null,"code":"rate_limit_exceeded"}}`,
			header: http.Header{"Retry-After-Ms": {"1500"}, "Retry-After": {"2"}},
			msg:    "Rate limit reached for text-embedding-3-small", typ: "requests", code: "rate_limit_exceeded", retryAfter: 1500 * time.Millisecond},
		{name: "azure", status: 404,
			body: `{"error":{"code":"DeploymentNotFound","message":"The API deployment for this resource does not exist."}}`,
			msg:  "The API deployment for this resource does not exist.", code: "DeploymentNotFound"},
		{name: "vllm", status: 400,
			body: `{"object":"error","message":"This model's maximum context length is 512 tokens.","type":"BadRequestError","param":null,"code":400}`,
			msg:  "This model's maximum context length is 512 tokens.", typ: "BadRequestError"},
		{name: "tei", status: 413, body: `{"error":"batch size 64 > maximum allowed batch size 32","error_type":"Validation"}`,
			msg: "batch size 64 > maximum allowed batch size 32"},
		{name: "detail", status: 422, body: `{"detail":"Field required"}`, msg: "Field required"},
		{name: "html", status: 502, body: `<html><body>Bad Gateway</body></html>`, msg: "Bad Gateway"},
		{name: "text", status: 503, body: "upstream overloaded", header: http.Header{"Retry-After": {"7"}}, msg: "upstream overloaded", retryAfter: 7 * time.Second},
		{name: "empty", status: 500, body: "", msg: "Internal Server Error"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := tc.header
			if h == nil {
				h = http.Header{}
			}
			e := ReadProviderError("p", &http.Response{StatusCode: tc.status, Header: h, Body: io.NopCloser(strings.NewReader(tc.body))})
			if e.Status != tc.status || e.Message != tc.msg || e.Type != tc.typ || e.Code != tc.code || e.Param != tc.param || e.RetryAfter != tc.retryAfter {
				t.Errorf("got %+v", e)
			}
		})
	}
}

func TestRetryAfter(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		h    http.Header
		want time.Duration
	}{
		{http.Header{}, 0},
		{http.Header{"Retry-After": {"3"}}, 3 * time.Second},
		{http.Header{"Retry-After": {"0.5"}}, 500 * time.Millisecond},
		{http.Header{"Retry-After": {"-1"}}, 0},
		{http.Header{"Retry-After": {now.Add(10 * time.Second).Format(http.TimeFormat)}}, 10 * time.Second},
		{http.Header{"Retry-After": {"soon"}}, 0},
		{http.Header{"Retry-After-Ms": {"250"}}, 250 * time.Millisecond},
	} {
		if got := RetryAfter(tc.h, now); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.h, got, tc.want)
		}
	}
}
