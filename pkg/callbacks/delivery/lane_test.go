package delivery

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
)

// gatedDestination answers each request once its gate is opened, and
// records the batch sizes it was sent.
type gatedDestination struct {
	gate    chan struct{}
	mu      sync.Mutex
	batches []int
}

func (g *gatedDestination) Send(_ context.Context, events []*logevent.Event) []error {
	g.mu.Lock()
	g.batches = append(g.batches, len(events))
	g.mu.Unlock()
	<-g.gate
	return make([]error, len(events))
}

// waitForRequests waits until n requests have come.
func (g *gatedDestination) waitForRequests(n int) {
	for {
		g.mu.Lock()
		got := len(g.batches)
		g.mu.Unlock()
		if got >= n {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A handler that stops waiting keeps the outcomes its events already have,
// and gets errAbandoned, retryable, for the rest: an event delivered is
// not reported lost, one pending is not reported delivered.
func TestLaneAbandonedSendKeepsKnownOutcomes(t *testing.T) {
	dest := &gatedDestination{gate: make(chan struct{}, 1)}
	l := &lane{dest: dest, timeout: time.Minute, maxBatch: 1, maxInflight: 1}
	dest.gate <- struct{}{} // the first request is answered, the second waits
	ctx, cancel := context.WithCancel(context.Background())
	evs := []*logevent.Event{{ID: "a"}, {ID: "b"}}
	got := make(chan []error, 1)
	go func() { got <- l.send(ctx, evs) }()
	dest.waitForRequests(2)
	cancel()
	errs := <-got
	if errs[0] != nil {
		t.Errorf("delivered event: %v, want nil", errs[0])
	}
	if !errors.Is(errs[1], errAbandoned) {
		t.Errorf("pending event: %v, want errAbandoned", errs[1])
	}
	close(dest.gate) // let the drain finish
}

// Events submitted while a request is in flight go out together in the
// next one, up to maxBatch.
func TestLaneBatchesWhatWaits(t *testing.T) {
	dest := &gatedDestination{gate: make(chan struct{})}
	l := &lane{dest: dest, timeout: time.Minute, maxBatch: 3, maxInflight: 1}
	ctx := context.Background()
	var wg sync.WaitGroup
	wg.Go(func() { l.send(ctx, []*logevent.Event{{ID: "first"}}) })
	dest.waitForRequests(1)
	for _, id := range []string{"x", "y"} {
		wg.Go(func() {
			if errs := l.send(ctx, []*logevent.Event{{ID: id + "1"}, {ID: id + "2"}}); errs[0] != nil || errs[1] != nil {
				t.Errorf("send %s: %v", id, errs)
			}
		})
	}
	for { // both submissions queue behind the first request
		l.mu.Lock()
		n := len(l.queue)
		l.mu.Unlock()
		if n == 4 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	close(dest.gate)
	wg.Wait()
	dest.mu.Lock()
	defer dest.mu.Unlock()
	if len(dest.batches) != 3 || dest.batches[0] != 1 || dest.batches[1]+dest.batches[2] != 4 || dest.batches[1] != 3 {
		t.Errorf("batches %v, want [1 3 1]", dest.batches)
	}
}
