package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestClientGone(t *testing.T) {
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	expired, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer stop()
	transport := fmt.Errorf("post: %w", context.Canceled)
	for _, tc := range []struct {
		name   string
		ctx    context.Context
		err    error
		status int // 0: err comes back unchanged
	}{
		{"no error", cancelled, nil, 0},
		{"client still there", context.Background(), Upstream(transport, "could not reach the provider"), 0},
		{"provider call cut short", cancelled, Upstream(transport, "could not reach the provider"), StatusClientClosed},
		{"body cut short", cancelled, errors.New("unexpected EOF"), StatusClientClosed},
		{"a store call abandoned", cancelled, Internal(errors.New("bolt: context canceled")), StatusClientClosed},
		{"the server's verdict on the body", cancelled, RequestTimeout("too slow"), 0},
		{"a refusal", cancelled, Forbidden("no"), 0},
		{"already a 499", cancelled, ClientClosed(nil), 0},
		{"the server's own deadline", expired, Upstream(transport, "could not reach the provider"), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := ClientGone(tc.ctx, tc.err)
			switch {
			case tc.status == 0 && got != tc.err:
				t.Errorf("got %v, want the error unchanged", got)
			case tc.status != 0 && (AsError(got).Status != tc.status || !errors.Is(got, tc.err)):
				t.Errorf("got %v, want %d with the error as its cause", got, tc.status)
			}
		})
	}
}

func TestCancelledIsAClientGone(t *testing.T) {
	if e := AsError(fmt.Errorf("read: %w", context.Canceled)); e.Status != StatusClientClosed || e.Code != "client_closed" {
		t.Errorf("a cancelled call: %d %s", e.Status, e.Code)
	}
}

// captureLogs sends the default logger to a buffer, as JSON, for the test.
func captureLogs(t *testing.T) *bytes.Buffer {
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	var buf bytes.Buffer
	slog.SetDefault(slog.New(slog.NewJSONHandler(&buf, nil)))
	return &buf
}

// A client that hung up is logged at info as a 499, and sent nothing,
// however the failure it caused looked: before the answer and after.
func TestClientGoneIsLoggedAsA499(t *testing.T) {
	for _, late := range []bool{false, true} {
		logs := captureLogs(t)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		r := httptest.NewRequest("POST", "/v1/embeddings", nil).WithContext(ctx)
		w := httptest.NewRecorder()
		err := Upstream(errors.New("dial: operation was canceled"), "The gateway could not reach the provider of model 'm'.")
		if late {
			LogLateError(r, err)
		} else {
			WriteError(w, r, err)
		}
		var rec map[string]any
		if jerr := json.Unmarshal(logs.Bytes(), &rec); jerr != nil || strings.Count(logs.String(), "\n") != 1 {
			t.Fatalf("late=%v: want one log line, got %q", late, logs)
		}
		if rec["level"] != "INFO" || rec["status"] != float64(StatusClientClosed) || rec["msg"] != "client closed request" {
			t.Errorf("late=%v: logged %v", late, rec)
		}
		if w.Body.Len() != 0 {
			t.Errorf("late=%v: wrote %q to a client that has gone", late, w.Body)
		}
	}
}
