package main

import (
	"context"
	"net/http"
	"time"
)

// streamer writes a streamed answer: every send is flushed at once, as a
// provider does, and pause waits the configured interval between chunks.
type streamer struct {
	w        http.ResponseWriter
	rc       *http.ResponseController
	ctx      context.Context
	interval time.Duration
	timer    *time.Timer
}

func newStreamer(w http.ResponseWriter, r *http.Request, contentType string, interval time.Duration) *streamer {
	h := w.Header()
	h.Set("Content-Type", contentType)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &streamer{w: w, rc: http.NewResponseController(w), ctx: r.Context(), interval: interval}
}

// send writes and flushes b; false once the client is gone.
func (s *streamer) send(b []byte) bool {
	if _, err := s.w.Write(b); err != nil {
		return false
	}
	return s.rc.Flush() == nil
}

// pause waits the interval between chunks; false once the client is gone.
func (s *streamer) pause() bool {
	if s.interval <= 0 {
		return s.ctx.Err() == nil
	}
	if s.timer == nil {
		s.timer = time.NewTimer(s.interval)
	} else {
		s.timer.Reset(s.interval)
	}
	select {
	case <-s.timer.C:
		return true
	case <-s.ctx.Done():
		s.timer.Stop()
		return false
	}
}
