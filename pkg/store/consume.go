package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"time"
)

// consumePollWait is how long one Receive waits for messages: SQS's longest
// long poll. Receive returns early on a message or when ctx is done.
const consumePollWait = 20 * time.Second

// consumeAckTimeout bounds an Ack after its handler succeeded. The ack runs
// even when ctx was cancelled meanwhile, so that shutting down does not
// redeliver work that was already done.
const consumeAckTimeout = 10 * time.Second

// Consume runs handle on q's messages with at most workers handlers at once,
// until ctx is done. A message whose handler returns nil is acked; one whose
// handler fails (or panics) is left alone, so the queue redelivers it after its
// visibility timeout and dead-letters it after too many receives (a panic is
// also logged, since no handler reported it). Handlers
// that run long should Extend their message.
//
// Consume only asks for as many messages as it has idle workers, so no message
// waits hidden in a buffer while its visibility timeout runs. It returns nil
// once ctx is done and every running handler has returned. A Receive error
// wrapping ErrUnavailable is retried with backoff; any other is returned, also
// after the running handlers have finished.
//
// This is the local process's consumer; in the cloud, SQS invokes the worker
// Lambdas instead.
func Consume(ctx context.Context, q Queue, workers int, handle func(context.Context, Message) error) error {
	if workers < 1 {
		return fmt.Errorf("store: consume: workers = %d, want ≥ 1", workers)
	}
	var wg sync.WaitGroup
	defer wg.Wait()
	slots := make(chan struct{}, workers) // one token per running handler
	backoff := time.Duration(0)
	for {
		// Wait for one idle worker, then take every other idle one (SQS
		// returns at most 10 messages per receive).
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return nil
		}
		n := 1
	more:
		for n < min(workers, 10) {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		msgs, err := q.Receive(ctx, n, consumePollWait)
		if err != nil || ctx.Err() != nil {
			// Anything received together with a cancellation is left for
			// redelivery; running handlers finish first (the deferred Wait).
			for range n {
				<-slots
			}
			if ctx.Err() != nil {
				return nil
			}
			if !errors.Is(err, ErrUnavailable) {
				return fmt.Errorf("store: consume: %w", err)
			}
			backoff = min(max(2*backoff, 100*time.Millisecond), 5*time.Second)
			select {
			case <-time.After(backoff):
			case <-ctx.Done():
				return nil
			}
			continue
		}
		backoff = 0
		for range n - len(msgs) {
			<-slots
		}
		for _, m := range msgs {
			wg.Go(func() {
				defer func() { <-slots }()
				if RunHandler(ctx, handle, m) != nil {
					return // left for redelivery
				}
				actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), consumeAckTimeout)
				defer cancel()
				_ = q.Ack(actx, m) // a failed ack means one more delivery, which at-least-once allows
			})
		}
	}
}

// RunHandler calls handle on m, turning a panic into an error (logged with
// its stack) so that one bad message is retried and dead-lettered instead
// of taking the process down. Consume runs every handler through it, and so
// does whoever handles a queue's messages without Consume (the local
// emitter's handoff).
func RunHandler(ctx context.Context, handle func(context.Context, Message) error, m Message) (err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("store: consume: handler panicked on message %s: %v", m.ID, r)
			slog.Error("handler panicked; message left for redelivery", "message", m.ID, "panic", r, "stack", string(debug.Stack()))
		}
	}()
	return handle(ctx, m)
}
