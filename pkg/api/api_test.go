package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

type sample struct {
	Model string   `json:"model"`
	N     int      `json:"n"`
	Input []string `json:"input"`
}

func decodeString(body string, limit int64) error {
	w := httptest.NewRecorder()
	r := httptest.NewRequest("POST", "/", strings.NewReader(body))
	var v sample
	return DecodeJSON(w, r, limit, &v)
}

func TestDecodeJSON(t *testing.T) {
	for _, tc := range []struct {
		name, body     string
		limit          int64
		status         int
		code, param    string
		messageHasText string
	}{
		{name: "ok", body: `{"model":"m","n":1}`},
		{name: "empty", body: ``, status: 400, code: "invalid_json", messageHasText: "empty"},
		{name: "syntax", body: `{"model":}`, status: 400, code: "invalid_json", messageHasText: "at byte"},
		{name: "truncated", body: `{"model":"m"`, status: 400, code: "invalid_json", messageHasText: "ends too early"},
		{name: "wrong type", body: `{"n":"x"}`, status: 400, code: "invalid_value", param: "n", messageHasText: "expected an integer"},
		{name: "wrong nested type", body: `{"input":[1]}`, status: 400, code: "invalid_value", param: "input", messageHasText: "expected a string"},
		{name: "not an object", body: `[1,2]`, status: 400, code: "invalid_json", messageHasText: "an object"},
		{name: "trailing data", body: `{"n":1} {"n":2}`, status: 400, code: "invalid_json", messageHasText: "single JSON value"},
		{name: "trailing garbage", body: `{"n":1} x`, status: 400, code: "invalid_json"},
		{name: "too large", body: `{"model":"` + strings.Repeat("a", 100) + `"}`, limit: 50, status: 413, code: "payload_too_large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := decodeString(tc.body, tc.limit)
			if tc.status == 0 {
				if err != nil {
					t.Fatalf("err = %v", err)
				}
				return
			}
			e := AsError(err)
			if e.Status != tc.status || e.Code != tc.code || e.Param != tc.param || !strings.Contains(e.Message, tc.messageHasText) {
				t.Errorf("got %d %s param=%q %q; want %d %s param=%q containing %q", e.Status, e.Code, e.Param, e.Message, tc.status, tc.code, tc.param, tc.messageHasText)
			}
		})
	}
}

func FuzzDecodeJSON(f *testing.F) {
	for _, s := range []string{`{"model":"m","n":1,"input":["a"]}`, `{"n":"x"}`, `[]`, `{`, `{"a":1}{}`, "\x00", `{"n":1e400}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, body string) {
		err := decodeString(body, 1<<10)
		if err == nil {
			return
		}
		e := AsError(err)
		// A client's body can only ever be a client error.
		if e.Status != 400 && e.Status != 413 {
			t.Fatalf("body %q gave status %d (%v)", body, e.Status, err)
		}
		if e.Message == "" || e.Type != TypeInvalidRequest {
			t.Fatalf("body %q gave an unhelpful error %+v", body, e)
		}
	})
}

func TestWriteError(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		body   string
	}{
		{InvalidValue("limit", "bad limit"), 400, `{"error":{"message":"bad limit","type":"invalid_request_error","param":"limit","code":"invalid_value"}}`},
		{fmt.Errorf("wrapped: %w", NotFound("no file")), 404, `{"error":{"message":"no file","type":"invalid_request_error","param":null,"code":"not_found"}}`},
		{errors.New("disk on fire"), 500, `{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":"internal_error"}}`},
		{fmt.Errorf("get: %w", store.ErrUnavailable), 503, ""},
		{&http.MaxBytesError{Limit: 5}, 413, ""},
	} {
		w := httptest.NewRecorder()
		WriteError(w, httptest.NewRequest("GET", "/", nil), tc.err)
		if w.Code != tc.status {
			t.Errorf("%v: status %d, want %d", tc.err, w.Code, tc.status)
		}
		if tc.body != "" && strings.TrimSpace(w.Body.String()) != tc.body {
			t.Errorf("%v: body %s, want %s", tc.err, w.Body, tc.body)
		}
		if strings.Contains(w.Body.String(), "disk on fire") {
			t.Error("an internal cause reached the client")
		}
		var b Body
		if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil || b.Error.Message == "" {
			t.Errorf("%v: body is not the error shape: %s", tc.err, w.Body)
		}
	}
}

func TestRateLimitedSetsRetryAfter(t *testing.T) {
	w := httptest.NewRecorder()
	WriteError(w, httptest.NewRequest("GET", "/", nil), RateLimited(TypeTokens, 1500*time.Millisecond, "slow down"))
	if w.Code != 429 || w.Header().Get("Retry-After") != "2" {
		t.Errorf("status %d Retry-After %q", w.Code, w.Header().Get("Retry-After"))
	}
	var b Body
	json.Unmarshal(w.Body.Bytes(), &b)
	if b.Error.Type != "tokens" || *b.Error.Code != "rate_limit_exceeded" {
		t.Errorf("body %s", w.Body)
	}
}

func TestNewList(t *testing.T) {
	l := NewList([]string{"a", "b"}, true, func(s string) string { return s })
	if *l.FirstID != "a" || *l.LastID != "b" || !l.HasMore || l.Object != "list" {
		t.Errorf("list = %+v", l)
	}
	b, _ := json.Marshal(NewList[string](nil, false, func(s string) string { return s }))
	if string(b) != `{"object":"list","data":[],"first_id":null,"last_id":null,"has_more":false}` {
		t.Errorf("empty list = %s", b)
	}
}

func TestReadBody(t *testing.T) {
	r := httptest.NewRequest("POST", "/", strings.NewReader(`{"a":1}`))
	b, err := ReadBody(httptest.NewRecorder(), r, 100)
	if err != nil || string(b) != `{"a":1}` {
		t.Fatalf("%q %v", b, err)
	}
	r = httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 101)))
	if _, err := ReadBody(httptest.NewRecorder(), r, 100); AsError(err).Status != 413 {
		t.Errorf("over the limit: %v", err)
	}
	r = httptest.NewRequest("POST", "/", strings.NewReader(strings.Repeat("x", 101)))
	r.ContentLength = -1 // chunked: the limit applies while reading
	if _, err := ReadBody(httptest.NewRecorder(), r, 100); AsError(err).Status != 413 {
		t.Errorf("chunked over the limit: %v", err)
	}
}

func TestOverheadLeavesOutWaits(t *testing.T) {
	ctx := WithStart(context.Background(), time.Now().Add(-50*time.Millisecond))
	AddWait(ctx, 30*time.Millisecond)
	AddWait(ctx, 15*time.Millisecond)
	if Waited(ctx) != 45*time.Millisecond {
		t.Errorf("waited %s", Waited(ctx))
	}
	h := http.Header{}
	SetOverhead(h, ctx)
	ms, err := strconv.ParseFloat(h.Get(OverheadHeader), 64)
	if err != nil || ms < 4 || ms > 40 {
		t.Errorf("overhead %q", h.Get(OverheadHeader))
	}
}

func TestOverheadIsNeverNegative(t *testing.T) {
	ctx := WithStart(context.Background(), time.Now())
	AddWait(ctx, time.Hour)
	h := http.Header{}
	SetOverhead(h, ctx)
	if h.Get(OverheadHeader) != "0.000" {
		t.Errorf("overhead %q", h.Get(OverheadHeader))
	}
}

func TestWaitsWithoutAStartAreIgnored(t *testing.T) {
	ctx := context.Background()
	AddWait(ctx, time.Second)
	if Waited(ctx) != 0 || Overhead(ctx) != 0 {
		t.Errorf("waited %s overhead %s", Waited(ctx), Overhead(ctx))
	}
}

// Starting a request is its context layer and its id: the layer carries the
// id, the start and the id header's value.
func TestStartAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	w := httptest.NewRecorder()
	var ctx context.Context
	if allocs := testing.AllocsPerRun(100, func() { ctx = Start(context.Background(), w) }); allocs != 2 {
		t.Errorf("%.0f allocations to start a request, want 2", allocs)
	}
	if id := RequestID(ctx); id == "" || w.Header().Get(RequestIDHeader) != id || RequestStart(ctx).IsZero() {
		t.Errorf("id %q, header %q, start %v", id, w.Header().Get(RequestIDHeader), RequestStart(ctx))
	}
}
