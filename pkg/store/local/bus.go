package local

import (
	"context"
	"fmt"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Bus is an in-process store.Bus: Publish appends every event, encoded with
// store.EncodeEvent, to each subscription queue, where it is as durable as any
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
		bodies[i] = store.EncodeEvent(e)
	}
	for _, q := range b.subs {
		if err := q.Send(ctx, bodies...); err != nil {
			return fmt.Errorf("local bus: publish: %w", err)
		}
	}
	return nil
}
