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
	used int64
	end  time.Time
}

var _ store.Limiter = (*Limiter)(nil)

// NewLimiter returns an empty limiter.
func NewLimiter() *Limiter {
	return &Limiter{windows: make(map[windowKey]*windowCount)}
}

// Take takes n units from scope's current window unless that would exceed
// limit; a refused take takes nothing and says when the window ends.
func (l *Limiter) Take(ctx context.Context, scope string, window time.Duration, limit, n int64) (store.Decision, error) {
	if window <= 0 || limit < 0 || n < 0 {
		return store.Decision{}, fmt.Errorf("local limiter: take %s: window %s, limit %d, n %d: want window > 0, limit ≥ 0, n ≥ 0", scope, window, limit, n)
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
		w = &windowCount{end: time.Unix(0, start).Add(window)}
		l.windows[key] = w
	}
	if w.used+n > limit {
		return store.Decision{Remaining: max(limit-w.used, 0), RetryAfter: w.end.Sub(now)}, nil
	}
	w.used += n
	return store.Decision{Allowed: true, Remaining: limit - w.used}, nil
}
