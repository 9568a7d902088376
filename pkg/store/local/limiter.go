package local

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// limiterPruneEvery is how often Take drops windows that have ended.
const limiterPruneEvery = 10 * time.Second

// Limiter is an in-process store.Limiter with fixed windows. A window of
// length w starts at a multiple of w since the Unix epoch, the same alignment
// as the cloud limiter's per-window items, so both count the same windows.
type Limiter struct {
	mu        sync.Mutex
	windows   map[windowKey]*windowCount
	nextPrune time.Time
}

type windowKey struct {
	scope  string
	length time.Duration
	start  int64 // Unix nanoseconds
}

type windowCount struct {
	used map[string]int64 // by counter
	end  time.Time
}

var _ store.Limiter = (*Limiter)(nil)

// NewLimiter returns an empty limiter.
func NewLimiter() *Limiter {
	return &Limiter{windows: make(map[windowKey]*windowCount)}
}

// Take applies takes to scope's current window unless one would pass its
// limit; a refused take takes nothing and says when the window ends.
func (l *Limiter) Take(ctx context.Context, scope string, window time.Duration, takes ...store.Take) (store.Decision, error) {
	if err := store.CheckTakes(window, takes); err != nil {
		return store.Decision{}, fmt.Errorf("local limiter: take %s: %w", scope, err)
	}
	if err := ctx.Err(); err != nil {
		return store.Decision{}, err
	}
	now := time.Now()
	start := now.UnixNano() - now.UnixNano()%int64(window)
	key := windowKey{scope: scope, length: window, start: start}

	l.mu.Lock()
	defer l.mu.Unlock()
	if !now.Before(l.nextPrune) {
		for k, w := range l.windows {
			if !now.Before(w.end) {
				delete(l.windows, k)
			}
		}
		l.nextPrune = now.Add(limiterPruneEvery)
	}
	w := l.windows[key]
	if w == nil {
		w = &windowCount{used: map[string]int64{}, end: time.Unix(0, start).Add(window)}
		l.windows[key] = w
	}
	for _, t := range takes {
		if w.used[t.Counter]+t.N > t.Limit {
			return store.Decision{Refused: t.Counter, Remaining: max(t.Limit-w.used[t.Counter], 0), RetryAfter: w.end.Sub(now)}, nil
		}
	}
	for _, t := range takes {
		if t.N > 0 {
			w.used[t.Counter] += t.N
		}
	}
	first := takes[0]
	return store.Decision{Allowed: true, Remaining: first.Limit - w.used[first.Counter]}, nil
}
