package main

import (
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
)

// stats counts what the upstream served. It is cheap on the hot path: one
// atomic add per counter, and routes are registered up front.
type stats struct {
	total          atomic.Int64
	withCredential atomic.Int64
	injectedErrors atomic.Int64
	loggingEvents  atomic.Int64

	mu     sync.RWMutex
	routes map[string]*atomic.Int64
}

// statsSnapshot is the JSON answer of GET /_bench/stats.
type statsSnapshot struct {
	Total          int64            `json:"total"`
	WithCredential int64            `json:"with_credential"`
	InjectedErrors int64            `json:"injected_errors"`
	LoggingEvents  int64            `json:"logging_events"`
	Routes         map[string]int64 `json:"routes"`
}

func newStats() *stats { return &stats{routes: map[string]*atomic.Int64{}} }

func (s *stats) counter(route string) *atomic.Int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.routes[route]
	if !ok {
		c = new(atomic.Int64)
		s.routes[route] = c
	}
	return c
}

func (s *stats) snapshot() statsSnapshot {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := statsSnapshot{
		Total:          s.total.Load(),
		WithCredential: s.withCredential.Load(),
		InjectedErrors: s.injectedErrors.Load(),
		LoggingEvents:  s.loggingEvents.Load(),
		Routes:         make(map[string]int64, len(s.routes)),
	}
	for name, c := range s.routes {
		out.Routes[name] = c.Load()
	}
	return out
}

// hasCredential reports whether the request carries any of the credentials a
// provider would look at. The upstream accepts every one of them.
func hasCredential(r *http.Request) bool {
	for _, h := range [...]string{"Authorization", "X-Api-Key", "Api-Key", "X-Goog-Api-Key"} {
		if r.Header.Get(h) != "" {
			return true
		}
	}
	return strings.Contains(r.URL.RawQuery, "key=")
}
