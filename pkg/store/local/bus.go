package local

import (
	"context"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Bus is an in-process store.Bus: Publish appends every event, encoded with
// store.EncodeEventBinary, to each subscription queue, where it is as durable as any
// queued message. Subscribers decode with store.DecodeEvent.
type Bus struct {
	subs []*Queue
}

var _ store.Bus = (*Bus)(nil)

// NewBus returns a bus that delivers to the given subscription queues.
func NewBus(subscriptions ...*Queue) *Bus {
	return &Bus{subs: subscriptions}
}

// Publish sends events to every subscription. If a send fails the publish can
// be retried; subscribers that already had the events see them twice, which
// at-least-once delivery allows.
func (b *Bus) Publish(ctx context.Context, events ...store.Event) error {
	if len(events) == 0 {
		return nil
	}
	bodies := make([][]byte, len(events))
	for i, e := range events {
		bodies[i] = store.EncodeEventBinary(e)
	}
	for _, q := range b.subs {
		if err := q.Send(ctx, bodies...); err != nil {
			return fmt.Errorf("local bus: publish: %w", err)
		}
	}
	return nil
}

// PublishHandoff publishes events as Publish does, but as received already
// by the caller, hidden for their visibility timeout: the caller is the
// subscription queue's consumer in this process and handles them without a
// Receive (the emitter hands log events to the delivery job in memory, and
// writes here those it has not delivered within a moment). ids[i] is
// events[i]'s message ID, under which the caller may have handled it
// already. It acks done — what it handed over earlier and has handled — in
// the same transaction. A message it does not ack becomes visible after the
// timeout, or at the next start, and the queue's consumers receive it as
// usual. It needs exactly one subscription.
func (b *Bus) PublishHandoff(ctx context.Context, done []store.Message, ids []string, events ...store.Event) ([]store.Message, error) {
	q, err := b.handoffQueue()
	if err != nil {
		return nil, err
	}
	msgs, err := q.sendReceived(ctx, done, ids, events)
	if err != nil {
		return nil, fmt.Errorf("local bus: publish: %w", err)
	}
	return msgs, nil
}

// AckHandoff acks messages that PublishHandoff handed over and the caller
// has handled.
func (b *Bus) AckHandoff(ctx context.Context, done []store.Message) error {
	q, err := b.handoffQueue()
	if err != nil {
		return err
	}
	if err := q.ackAll(ctx, done); err != nil {
		return fmt.Errorf("local bus: ack: %w", err)
	}
	return nil
}

// handoffQueue is the one subscription whose consumer a handoff's caller is.
func (b *Bus) handoffQueue() (*Queue, error) {
	if len(b.subs) != 1 {
		return nil, fmt.Errorf("local bus: handoff needs one subscription, not %d", len(b.subs))
	}
	return b.subs[0], nil
}
