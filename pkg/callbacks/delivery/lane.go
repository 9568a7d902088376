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
	queue   []*item
	running int
}

// item is one event waiting in a lane.
type item struct {
	ev   *logevent.Event
	done chan struct{}
	err  error
}

// errAbandoned is an item's error when its handler stopped waiting.
var errAbandoned = errors.New("delivery: the handler stopped waiting for the destination")

// send submits events and waits for each one's outcome, or for ctx. An
// event whose outcome did not come in time gets an error (it is retried;
// destinations deduplicate a copy that did arrive).
func (l *lane) send(ctx context.Context, events []*logevent.Event) []error {
	items := make([]*item, len(events))
	for i, ev := range events {
		items[i] = &item{ev: ev, done: make(chan struct{})}
	}
	l.mu.Lock()
	l.queue = append(l.queue, items...)
	if l.running < l.maxInflight {
		l.running++
		go l.drain()
	}
	l.mu.Unlock()
	errs := make([]error, len(items))
	for i, it := range items {
		select {
		case <-it.done:
			errs[i] = it.err
		case <-ctx.Done():
			errs[i] = fmt.Errorf("%w: %w", errAbandoned, context.Cause(ctx))
		}
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
			it.err = errs[i]
			close(it.done)
		}
	}
}
