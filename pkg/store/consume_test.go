package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// fakeQueue is an in-memory queue that records acks; Receive returns what is
// pending at once or waits for ctx or wait. Consume's contract with a queue is
// narrow, so a fake keeps these tests exact and fast; the local adapter's
// test runs Consume against a real queue.
type fakeQueue struct {
	mu          sync.Mutex
	pending     []store.Message
	acked       []string
	receiveErrs []error // returned, one per Receive, before any message
	maxAsked    int
}

func newFakeQueue(bodies ...string) *fakeQueue {
	q := &fakeQueue{}
	for i, b := range bodies {
		q.pending = append(q.pending, store.Message{ID: fmt.Sprint(i), Body: []byte(b), Receives: 1, Receipt: fmt.Sprint(i)})
	}
	return q
}

func (q *fakeQueue) Send(context.Context, ...[]byte) error { return errors.New("not used") }

func (q *fakeQueue) Receive(ctx context.Context, limit int, wait time.Duration) ([]store.Message, error) {
	q.mu.Lock()
	q.maxAsked = max(q.maxAsked, limit)
	if len(q.receiveErrs) > 0 {
		err := q.receiveErrs[0]
		q.receiveErrs = q.receiveErrs[1:]
		q.mu.Unlock()
		return nil, err
	}
	n := min(limit, len(q.pending))
	msgs := q.pending[:n:n]
	q.pending = q.pending[n:]
	q.mu.Unlock()
	if n > 0 {
		return msgs, nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(wait):
		return nil, nil
	}
}

func (q *fakeQueue) Ack(_ context.Context, m store.Message) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.acked = append(q.acked, string(m.Body))
	return nil
}

func (q *fakeQueue) Extend(context.Context, store.Message, time.Duration) error { return nil }

func (q *fakeQueue) ackedSet() map[string]bool {
	q.mu.Lock()
	defer q.mu.Unlock()
	s := map[string]bool{}
	for _, b := range q.acked {
		s[b] = true
	}
	return s
}

// consume runs Consume in the background; stop cancels it and returns its error.
func consume(t *testing.T, q store.Queue, workers int, handle func(context.Context, store.Message) error) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- store.Consume(ctx, q, workers, handle) }()
	return func() error {
		cancel()
		select {
		case err := <-done:
			return err
		case <-time.After(10 * time.Second):
			t.Fatal("Consume did not return after cancel")
			return nil
		}
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestConsumeAcksSuccessesOnly(t *testing.T) {
	var bodies []string
	for i := range 30 {
		bodies = append(bodies, fmt.Sprintf("m%d", i))
	}
	q := newFakeQueue(bodies...)
	var handled atomic.Int32
	stop := consume(t, q, 4, func(_ context.Context, m store.Message) error {
		defer handled.Add(1)
		switch string(m.Body) {
		case "m3":
			return errors.New("failed")
		case "m7":
			panic("handler bug")
		}
		return nil
	})
	waitFor(t, "every message handled", func() bool { return handled.Load() == 30 })
	if err := stop(); err != nil {
		t.Fatalf("Consume: %v", err)
	}
	acked := q.ackedSet()
	for _, b := range bodies {
		if want := b != "m3" && b != "m7"; acked[b] != want {
			t.Fatalf("message %s acked = %v, want %v", b, acked[b], want)
		}
	}
}

func TestConsumeBoundsConcurrency(t *testing.T) {
	var bodies []string
	for i := range 40 {
		bodies = append(bodies, fmt.Sprint(i))
	}
	q := newFakeQueue(bodies...)
	var running, peak, handled atomic.Int32
	stop := consume(t, q, 3, func(context.Context, store.Message) error {
		n := running.Add(1)
		for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
		}
		time.Sleep(2 * time.Millisecond)
		running.Add(-1)
		handled.Add(1)
		return nil
	})
	waitFor(t, "every message handled", func() bool { return handled.Load() == 40 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if p := peak.Load(); p > 3 {
		t.Fatalf("%d handlers ran at once, want at most 3", p)
	}
	if q.maxAsked > 3 {
		t.Fatalf("Consume asked for %d messages with 3 workers", q.maxAsked)
	}
}

func TestConsumeWaitsForInFlightHandlers(t *testing.T) {
	q := newFakeQueue("slow")
	started, release := make(chan struct{}), make(chan struct{})
	var finished atomic.Bool
	stop := consume(t, q, 2, func(ctx context.Context, _ store.Message) error {
		close(started)
		<-release
		finished.Store(true)
		return nil // succeeded even though ctx was cancelled meanwhile: still acked
	})
	<-started
	go func() {
		time.Sleep(50 * time.Millisecond)
		close(release)
	}()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if !finished.Load() {
		t.Fatal("Consume returned before its running handler finished")
	}
	if !q.ackedSet()["slow"] {
		t.Fatal("a handler that succeeded during shutdown was not acked")
	}
}

func TestConsumeReceiveErrors(t *testing.T) {
	// ErrUnavailable is retried.
	q := newFakeQueue("after outage")
	q.receiveErrs = []error{fmt.Errorf("sqs: %w", store.ErrUnavailable)}
	var handled atomic.Bool
	stop := consume(t, q, 1, func(context.Context, store.Message) error { handled.Store(true); return nil })
	waitFor(t, "the message after an outage", handled.Load)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	// Any other error ends Consume.
	q = newFakeQueue()
	boom := errors.New("boom")
	q.receiveErrs = []error{boom}
	if err := store.Consume(t.Context(), q, 1, nil); !errors.Is(err, boom) {
		t.Fatalf("Consume = %v, want %v", err, boom)
	}
	if err := store.Consume(t.Context(), q, 0, nil); err == nil {
		t.Fatal("Consume with 0 workers succeeded")
	}
}
