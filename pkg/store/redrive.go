package store

import (
	"context"
	"fmt"
	"time"
)

// redriveWait is how long Redrive waits for more messages before it takes
// the queue for empty.
const redriveWait = time.Second

// Redrive moves every message of the dead-letter queue from to the queue
// to (their bodies unchanged), and returns how many it moved. A message is
// acked only once it was sent: an interruption leaves it where it was, or
// (at worst) in both queues, which at-least-once consumers allow. It stops
// when from has nothing visible for a second, or when ctx ends.
func Redrive(ctx context.Context, from, to Queue) (int, error) {
	moved := 0
	for {
		msgs, err := from.Receive(ctx, 10, redriveWait)
		if err != nil {
			return moved, fmt.Errorf("store: redrive: receive: %w", err)
		}
		if len(msgs) == 0 {
			return moved, nil
		}
		bodies := make([][]byte, len(msgs))
		for i, m := range msgs {
			bodies[i] = m.Body
		}
		if err := to.Send(ctx, bodies...); err != nil {
			return moved, fmt.Errorf("store: redrive: send: %w", err)
		}
		for _, m := range msgs {
			if err := from.Ack(ctx, m); err != nil {
				return moved, fmt.Errorf("store: redrive: ack %s: %w", m.ID, err)
			}
			moved++
		}
	}
}
