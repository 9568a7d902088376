package passthrough

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// watchdog cancels a call that runs past its time limit, or whose answer
// stops arriving for longer than its idle limit, with one timer: a read only
// notes the time, and when the timer fires it cancels the call or sleeps
// until the earliest deadline still ahead. (A timer per limit, reset on every
// read of a stream, cost a timer operation per chunk and two timers a call.)
type watchdog struct {
	cancel context.CancelCauseFunc
	limit  time.Time // the whole call's deadline
	last   atomic.Int64

	mu    sync.Mutex
	idle  time.Duration // 0 until the answer starts
	timer *time.Timer
}

// startWatchdog starts watching a call that may take timeout in all.
func startWatchdog(cancel context.CancelCauseFunc, timeout time.Duration) *watchdog {
	w := &watchdog{cancel: cancel, limit: time.Now().Add(timeout)}
	w.mu.Lock()
	w.timer = time.AfterFunc(timeout, w.fire)
	w.mu.Unlock()
	return w
}

// answering says the answer has started: from now on, idle without a read
// ends the call.
func (w *watchdog) answering(idle time.Duration) {
	w.read()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.idle = idle
	w.timer.Reset(time.Until(w.next()))
}

// read notes that a part of the answer arrived.
func (w *watchdog) read() { w.last.Store(time.Now().UnixNano()) }

// stop ends the watch.
func (w *watchdog) stop() { w.timer.Stop() }

// next is the earliest deadline: the call's, or the idle one after the
// last read.
func (w *watchdog) next() time.Time {
	if w.idle > 0 {
		if d := time.Unix(0, w.last.Load()).Add(w.idle); d.Before(w.limit) {
			return d
		}
	}
	return w.limit
}

func (w *watchdog) fire() {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	switch next := w.next(); {
	case !now.Before(w.limit):
		w.cancel(errCallTimeout)
	case !now.Before(next):
		w.cancel(errIdleTimeout)
	default:
		w.timer.Reset(next.Sub(now))
	}
}
