package delivery

import (
	"context"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// TestFlakyDestination sends 1,000 events through the real queue path (the
// embedded bus, its durable delivery queue with redelivery, store.Consume)
// to a destination that fails 30% of its calls: two thirds of those at once
// with a 503, one third slowly — it records the events, then answers after
// the worker has given up, the classic source of duplicates. Every event
// must end delivered or dead-lettered, never both, never neither, and what
// the destination received twice must be within the re-sends the worker
// made.
func TestFlakyDestination(t *testing.T) {
	h := newHarness(t, local.QueueOptions{Visibility: time.Second, MaxReceives: 10})
	in := newIngestion(t)
	var mu sync.Mutex
	rng := rand.New(rand.NewPCG(16, 30))
	in.fail = func(int) (int, time.Duration, bool) {
		mu.Lock()
		p := rng.Float64()
		mu.Unlock()
		switch {
		case p < 0.2:
			return http.StatusServiceUnavailable, 0, false
		case p < 0.3:
			return http.StatusMultiStatus, time.Second, true // slower than the request timeout
		}
		return http.StatusMultiStatus, 0, true
	}
	h.add(t, "team-a", callbacks.Langfuse, callbacks.TypeSuccessAndFailure, in.vars())
	d := h.deliverer(t, Options{Retries: 2, MaxReceives: 2, Backoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		RequestTimeout: 50 * time.Millisecond}, "")

	const published = 1000
	ctx := context.Background()
	publishMixed(t, h, published)

	cctx, stop := context.WithCancel(ctx)
	consumed := make(chan error, 1)
	go func() { consumed <- store.Consume(cctx, h.backend.Deliveries, 8, d.Handle) }()
	s := d.Stats()
	deadline := time.Now().Add(60 * time.Second)
	for s.Delivered.Load()+s.DeadLettered.Load() < published && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	if err := <-consumed; err != nil {
		t.Fatal(err)
	}

	delivered, dead := s.Delivered.Load(), s.DeadLettered.Load()
	dls := h.deadLetters(t)
	received := in.ids()
	duplicates := 0
	for _, n := range received {
		duplicates += n - 1
	}
	t.Logf("published %d: delivered %d, dead-lettered %d; destination requests %d, received %d distinct (%d duplicate receptions), re-sends %d",
		published, delivered, dead, in.requests(), len(received), duplicates, s.Resent.Load())

	if delivered+dead != published {
		t.Fatalf("delivered %d + dead-lettered %d = %d, want %d", delivered, dead, delivered+dead, published)
	}
	buried := map[string]bool{}
	for _, dl := range dls {
		for _, ev := range dl.events {
			if buried[ev.ID] {
				t.Errorf("%s dead-lettered twice", ev.ID)
			}
			buried[ev.ID] = true
		}
	}
	if int64(len(buried)) != dead {
		t.Errorf("%d events in the dead-letter queue for %d dead-lettered", len(buried), dead)
	}
	for i := range published {
		id := fmtID(i)
		if received[id] == 0 && !buried[id] {
			t.Errorf("%s was neither received nor dead-lettered: lost", id)
		}
	}
	// Confirmed deliveries are the published events not dead-lettered; each
	// of them must have reached the destination.
	confirmed := 0
	for i := range published {
		if id := fmtID(i); !buried[id] && received[id] > 0 {
			confirmed++
		}
	}
	if int64(confirmed) != delivered {
		t.Errorf("%d events received and not dead-lettered, %d confirmed delivered", confirmed, delivered)
	}
	// At least once: a duplicate reception needs a re-send.
	if int64(duplicates) > s.Resent.Load() {
		t.Errorf("%d duplicate receptions, but only %d re-sends", duplicates, s.Resent.Load())
	}
	if msgs, err := h.backend.Deliveries.Receive(ctx, 10, 0); err != nil || len(msgs) != 0 {
		t.Errorf("the delivery queue still holds %d messages (%v)", len(msgs), err)
	}
}

// publishMixed publishes n events of team-a in messages of one to five
// events, every tenth a failure.
func publishMixed(t *testing.T, h *harness, published int) {
	t.Helper()
	ctx := context.Background()
	var batch []store.Event
	for i, n := 0, 0; i < published; i += n {
		n = min(1+i%5, published-i) // messages of one to five events
		var evs []*logevent.Event
		for k := range n {
			status := logevent.StatusSuccess
			if (i+k)%10 == 0 {
				status = logevent.StatusFailure
			}
			evs = append(evs, event(fmtID(i+k), "team-a", status))
		}
		body, err := logevent.EncodeEvents(evs)
		if err != nil {
			t.Fatal(err)
		}
		batch = append(batch, store.Event{Attributes: map[string]string{logevent.AttrTeam: "team-a"}, Body: body})
	}
	if err := h.backend.Bus.Publish(ctx, batch...); err != nil {
		t.Fatal(err)
	}
}
