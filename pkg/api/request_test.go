package api

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"
)

// A request's id and its timing travel in one context value: setting
// either keeps the other, and what a call waited is counted once however
// the context was layered.
func TestRequestIDAndTimingKeepEachOther(t *testing.T) {
	start := time.Now().Add(-time.Second)
	ctx := WithStart(WithRequestID(context.Background(), "req_a"), start)
	if got := RequestID(ctx); got != "req_a" {
		t.Errorf("WithStart lost the id: %q", got)
	}
	ctx = WithRequestID(ctx, "req_b")
	if got := RequestStart(ctx); !got.Equal(start) {
		t.Errorf("WithRequestID lost the start: %v, want %v", got, start)
	}
	AddWait(ctx, 300*time.Millisecond)
	if got := Waited(ctx); got != 300*time.Millisecond {
		t.Errorf("waited %v, want 300ms", got)
	}
	o := Overhead(ctx)
	if since := time.Since(start); o < 700*time.Millisecond || o > since-300*time.Millisecond {
		t.Errorf("overhead %v, want the %v since the start less the 300ms waited", o, since)
	}
}

func TestStartSetsTheIDOnTheResponse(t *testing.T) {
	w := httptest.NewRecorder()
	ctx := Start(context.Background(), w)
	if id := RequestID(ctx); id == "" || w.Header().Get(RequestIDHeader) != id {
		t.Errorf("id %q, header %q", id, w.Header().Get(RequestIDHeader))
	}
	if RequestStart(ctx).IsZero() || Waited(ctx) != 0 {
		t.Errorf("start %v, waited %v", RequestStart(ctx), Waited(ctx))
	}
}
