package storetest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Bus runs the conformance suite for store.Bus. open returns a bus and a queue
// subscribed to it; events arrive there encoded as store.EncodeEvent writes
// them, and the suite decodes them with store.DecodeEvent.
func Bus(t *testing.T, open func(t *testing.T) (bus store.Bus, subscription store.Queue)) {
	cases := []struct {
		name string
		run  func(t *testing.T, ctx context.Context, bus store.Bus, sub store.Queue)
	}{
		{"PublishOne", busPublishOne},
		{"PublishBatch", busPublishBatch},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bus, sub := open(t)
			c.run(t, testCtx(t, time.Minute), bus, sub)
		})
	}
}

// receiveEvents receives and acks n events, keyed by body.
func receiveEvents(t *testing.T, ctx context.Context, sub store.Queue, n int) map[string]store.Event {
	t.Helper()
	got := make(map[string]store.Event, n)
	for _, m := range receiveN(t, ctx, sub, n, 15*time.Second) {
		e, err := store.DecodeEvent(m)
		ok(t, err, "DecodeEvent")
		if _, dup := got[string(e.Body)]; dup {
			t.Fatalf("event %q delivered twice", e.Body)
		}
		got[string(e.Body)] = e
		ok(t, sub.Ack(ctx, m), "Ack")
	}
	return got
}

func sameEvent(t *testing.T, got, want store.Event) {
	t.Helper()
	if !bytes.Equal(got.Body, want.Body) || !(len(got.Attributes) == 0 && len(want.Attributes) == 0 || maps.Equal(got.Attributes, want.Attributes)) {
		t.Fatalf("event mismatch\n got %q %v\nwant %q %v", got.Body, got.Attributes, want.Body, want.Attributes)
	}
}

func busPublishOne(t *testing.T, ctx context.Context, bus store.Bus, sub store.Queue) {
	ok(t, bus.Publish(ctx), "Publish of nothing")
	want := store.Event{
		Attributes: map[string]string{"team": "team-" + uniq(), "status": "success"},
		Body:       []byte(`{"id":"req_1","model":"gpt-4o","messages":[{"content":"<b>&amp;</b> ünï"}]}`),
	}
	ok(t, bus.Publish(ctx, want), "Publish")
	sameEvent(t, receiveEvents(t, ctx, sub, 1)[string(want.Body)], want)
}

func busPublishBatch(t *testing.T, ctx context.Context, bus store.Bus, sub store.Queue) {
	const n = 25 // more than SNS's 10 per batch
	events := make([]store.Event, n)
	for i := range events {
		events[i] = store.Event{
			Attributes: map[string]string{"team": fmt.Sprintf("team-%d", i%3), "status": []string{"success", "failure"}[i%2]},
			Body:       fmt.Appendf(nil, `{"id":"req_%d"}`, i),
		}
	}
	events[n-2].Attributes = nil
	events[n-1].Body = []byte{0xff, 0xfe, 0, 1, '"'} // not UTF-8: still delivered intact
	ok(t, bus.Publish(ctx, events...), "Publish of 25")
	got := receiveEvents(t, ctx, sub, n)
	for _, want := range events {
		e, found := got[string(want.Body)]
		if !found {
			t.Fatalf("event %q not delivered", want.Body)
		}
		sameEvent(t, e, want)
	}
}
