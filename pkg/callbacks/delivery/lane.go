package delivery

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// A lane batches the events bound for one destination: what concurrent
// handlers submit while a request is in flight goes out together in the
// next one (group commit). An idle lane sends at once, so batching adds no
// latency; a busy one sends batches as large as the destination takes.
type lane struct {
	dest        Destination
	timeout     time.Duration // bounds one Send
	maxBatch    int
	maxInflight int
	onSend      func(n int)

	mu      sync.Mutex
	queue   []item
	running int
}

// item is one event waiting in a lane: the i-th of its submission.
type item struct {
	ev  *logevent.Event
	sub *submission
	i   int
}

// submission is the events of one send and their outcomes, one wait for
// them all (not a channel an event).
type submission struct {
	mu   sync.Mutex
	errs []error // errPending until the event's request is answered
	left int
	done chan struct{} // closed when left reaches 0
}

// errPending marks an outcome not known yet.
var errPending = errors.New("delivery: pending")

// settle records the outcome of the i-th event.
func (s *submission) settle(i int, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.errs[i] = err
	if s.left--; s.left == 0 {
		close(s.done)
	}
}

// errAbandoned is an item's error when its handler stopped waiting.
var errAbandoned = errors.New("delivery: the handler stopped waiting for the destination")

// send submits events and waits for each one's outcome, or for ctx. An
// event whose outcome did not come in time gets an error (it is retried;
// destinations deduplicate a copy that did arrive).
func (l *lane) send(ctx context.Context, events []*logevent.Event) []error {
	if len(events) == 0 {
		return nil
	}
	sub := &submission{errs: make([]error, len(events)), left: len(events), done: make(chan struct{})}
	for i := range sub.errs {
		sub.errs[i] = errPending
	}
	l.mu.Lock()
	for i, ev := range events {
		l.queue = append(l.queue, item{ev: ev, sub: sub, i: i})
	}
	if l.running < l.maxInflight {
		l.running++
		go l.drain()
	}
	l.mu.Unlock()
	select {
	case <-sub.done:
		return sub.errs
	case <-ctx.Done():
	}
	abandoned := fmt.Errorf("%w: %w", errAbandoned, context.Cause(ctx))
	sub.mu.Lock()
	defer sub.mu.Unlock()
	errs := make([]error, len(sub.errs))
	for i, err := range sub.errs {
		if err == errPending {
			err = abandoned
		}
		errs[i] = err
	}
	return errs
}

// drain sends batches until the queue is empty. Each Send runs on its own
// deadline: the handlers that queued its events may stop waiting, others
// may not have.
func (l *lane) drain() {
	for {
		l.mu.Lock()
		n := min(len(l.queue), l.maxBatch)
		if n == 0 {
			l.running--
			l.mu.Unlock()
			return
		}
		batch := l.queue[:n:n]
		l.queue = l.queue[n:]
		l.mu.Unlock()

		events := make([]*logevent.Event, n)
		for i, it := range batch {
			events[i] = it.ev
		}
		if l.onSend != nil {
			l.onSend(n)
		}
		ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
		errs := l.dest.Send(ctx, events)
		cancel()
		for i, it := range batch {
			it.sub.settle(it.i, errs[i])
		}
	}
}
