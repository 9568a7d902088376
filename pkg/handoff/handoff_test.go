package handoff

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

type Event = logevent.Event

// handoffBackend is the local backend with a short delivery visibility, so
// that what the handoff leaves reaches the queue's consumers quickly.
func handoffBackend(t *testing.T, visibility time.Duration) (*store.Backend, LocalBus) {
	t.Helper()
	b, err := local.Open(t.TempDir(), local.Options{Deliveries: local.QueueOptions{Visibility: visibility}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	bus, ok := b.Bus.(LocalBus)
	if !ok {
		t.Fatal("the local bus cannot hand over")
	}
	return b, bus
}

// attached is bus handing over to handle, up to workers at once.
func attached(bus LocalBus, handle Handler, workers int) *Bus {
	b := New(bus)
	b.Attach(handle, workers)
	return b
}

func listeningTo(teams ...string) logevent.Listeners {
	return logevent.ListeningFunc(func(_ context.Context, team, _ string) (bool, error) {
		for _, t := range teams {
			if t == team {
				return true, nil
			}
		}
		return false, nil
	})
}

func event(team string, messages string) *Event {
	return &Event{ID: "req_1", CallType: logevent.CallEmbedding, Status: logevent.StatusSuccess, Model: "m",
		Metadata: logevent.Metadata{UserAPIKeyTeamID: team}, Messages: json.RawMessage(messages)}
}

// handled records what a Handler was given.
type handled struct {
	mu     sync.Mutex
	events [][]*Event
	ids    []string // the messages' IDs
	err    error
	block  chan struct{} // when set, handlers wait for it
}

func (h *handled) handle(_ context.Context, m store.Message, events []*Event) error {
	if h.block != nil {
		<-h.block
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.events = append(h.events, events)
	h.ids = append(h.ids, m.ID)
	return h.err
}

// writesCounted counts a handoff bus's writes of handed-over events.
type writesCounted struct {
	LocalBus
	writes atomic.Int64
}

func (w *writesCounted) PublishHandoff(ctx context.Context, done []store.Message, ids []string, events ...store.Event) ([]store.Message, error) {
	if len(events) > 0 {
		w.writes.Add(1)
	}
	return w.LocalBus.PublishHandoff(ctx, done, ids, events...)
}

// eventually polls cond for up to 5 s.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(5 * time.Second); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("after 5 s: %s", what)
		}
	}
}

func (h *handled) calls() [][]*Event {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([][]*Event(nil), h.events...)
}

func queued(t *testing.T, b *store.Backend) int {
	t.Helper()
	n, err := b.Deliveries.(interface{ Len() (int, error) }).Len()
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// The emitter hands its events to the delivery handler as they are in
// memory — the very events emitted, grouped in one message — and, as they
// are delivered in time, never writes them to the queue.
func TestHandoffDeliversInMemory(t *testing.T) {
	b, bus := handoffBackend(t, time.Minute)
	h := &handled{}
	counted := &writesCounted{LocalBus: bus}
	e := logevent.NewEmitter(attached(counted, h.handle, 4), b.Blobs, listeningTo("a"), 0)
	ctx := context.Background()
	first, second := event("a", `"one"`), event("a", `"two"`)
	second.ID = "req_2"
	w1, w2 := e.Start(ctx, first), e.Start(ctx, second)
	w1()
	w2()
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	calls := h.calls()
	if len(calls) != 1 || len(calls[0]) != 2 || calls[0][0] != first || calls[0][1] != second {
		t.Fatalf("handler calls %v, want one with the two emitted events themselves", calls)
	}
	if n := counted.writes.Load(); n != 0 {
		t.Errorf("%d writes to the delivery queue for events delivered in time, want 0", n)
	}
	if n := queued(t, b); n != 0 {
		t.Errorf("%d messages in the delivery queue, want 0", n)
	}
}

// Events whose handler is still running after persistAfter are written to
// the queue, hidden from its consumers while the handler runs, and acked
// once it succeeds.
func TestHandoffSlowDeliveryIsWrittenThenAcked(t *testing.T) {
	b, bus := handoffBackend(t, time.Minute)
	h := &handled{block: make(chan struct{})}
	hb := attached(bus, h.handle, 4)
	hb.persistAfter = 10 * time.Millisecond
	e := logevent.NewEmitter(hb, b.Blobs, listeningTo("a"), 0)
	ctx := context.Background()
	e.Emit(ctx, event("a", `"slow"`))
	eventually(t, "the slow delivery's events are not in the queue", func() bool { return queued(t, b) == 1 })
	if got, err := b.Deliveries.Receive(ctx, 10, 0); err != nil || len(got) != 0 {
		t.Fatalf("a consumer received %d messages (%v) while the handler runs", len(got), err)
	}
	close(h.block)
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if n := queued(t, b); n != 0 {
		t.Errorf("%d messages in the delivery queue after the handler succeeded, want 0 (acked)", n)
	}
}

// A message whose handler fails stays in the queue and reaches its
// consumers after the visibility timeout, with the same events.
func TestHandoffFailureLeavesTheMessageToTheQueue(t *testing.T) {
	b, bus := handoffBackend(t, 50*time.Millisecond)
	h := &handled{err: errors.New("destination down")}
	e := logevent.NewEmitter(attached(bus, h.handle, 4), b.Blobs, listeningTo("a"), 0)
	ctx := context.Background()
	e.Emit(ctx, event("a", `"one"`))
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Deliveries.Receive(ctx, 10, 2*time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Receive: %d messages, %v; want the failed one", len(msgs), err)
	}
	if msgs[0].Receives != 2 {
		t.Errorf("received at receive %d, want 2", msgs[0].Receives)
	}
	// The handler's progress is kept under the message's ID: the queue's
	// copy must carry the one it was given.
	if ids := h.ids; len(ids) != 1 || msgs[0].ID != ids[0] {
		t.Errorf("queued as message %q, handled as %v", msgs[0].ID, ids)
	}
	e2, err := store.DecodeEvent(msgs[0])
	if err != nil {
		t.Fatal(err)
	}
	evs, err := logevent.DecodeEvents(e2.Body)
	if err != nil || len(evs) != 1 || string(evs[0].Messages) != `"one"` {
		t.Fatalf("redelivered events %v, %v", evs, err)
	}
}

// With every handler busy, a publish goes to the queue for its consumers
// instead of piling up in memory.
func TestHandoffBusyLeavesNewEventsToTheQueue(t *testing.T) {
	b, bus := handoffBackend(t, time.Minute)
	h := &handled{block: make(chan struct{})}
	e := logevent.NewEmitter(attached(bus, h.handle, 1), b.Blobs, listeningTo("a"), 0)
	ctx := context.Background()
	e.Emit(ctx, event("a", `"held"`)) // its handler blocks: the one slot is taken
	e.Emit(ctx, event("a", `"queued"`))
	msgs, err := b.Deliveries.Receive(ctx, 10, time.Second)
	if err != nil || len(msgs) != 1 || msgs[0].Receives != 1 {
		t.Fatalf("Receive: %d messages (%v), want the second event's, visible at once", len(msgs), err)
	}
	close(h.block)
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := h.calls(); len(calls) != 1 || string(calls[0][0].Messages) != `"held"` {
		t.Errorf("handler calls %v, want the first event's only", calls)
	}
}

// A caller that waits for its publish does not wait out the linger.
func TestHandoffWaitingCallerIsNotLingered(t *testing.T) {
	b, bus := handoffBackend(t, time.Minute)
	hb := attached(bus, (&handled{}).handle, 4)
	hb.linger = time.Hour
	e := logevent.NewEmitter(hb, b.Blobs, listeningTo("a"), 0)
	done := make(chan struct{})
	go func() {
		e.Emit(context.Background(), event("a", `"one"`))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Emit waited for the linger")
	}
	if err := e.Drain(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// A handler that panics leaves its message to the queue, and the process
// standing.
func TestHandoffPanicLeavesTheMessageToTheQueue(t *testing.T) {
	b, bus := handoffBackend(t, 50*time.Millisecond)
	e := logevent.NewEmitter(attached(bus, func(context.Context, store.Message, []*Event) error { panic("boom") }, 4), b.Blobs, listeningTo("a"), 0)
	ctx := context.Background()
	e.Emit(ctx, event("a", `"one"`))
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Deliveries.Receive(ctx, 10, 2*time.Second)
	if err != nil || len(msgs) != 1 || msgs[0].Receives != 2 {
		t.Fatalf("Receive: %d messages (%v), want the one whose handler panicked, at its second receive", len(msgs), err)
	}
}

// A round's events of one team go to one handler whole, however large:
// the destination lanes batch them, and the local queue takes a message of
// any size should they be written. (Bus events are cut to the bus's size.)
func TestHandoffHandsATeamsRoundWhole(t *testing.T) {
	b, bus := handoffBackend(t, time.Minute)
	h := &handled{}
	hb := attached(bus, h.handle, 4)
	hb.linger = time.Hour
	e := logevent.NewEmitter(hb, b.Blobs, listeningTo("a"), 4<<10) // the three gather; the Emit below hurries them
	ctx := context.Background()
	big := `"` + strings.Repeat("x", 3<<10) + `"`
	var waits []func()
	for range 3 {
		waits = append(waits, e.Start(ctx, event("a", big)))
	}
	for _, w := range waits {
		w()
	}
	if err := e.Drain(ctx); err != nil {
		t.Fatal(err)
	}
	if calls := h.calls(); len(calls) != 1 || len(calls[0]) != 3 {
		t.Errorf("handler calls of %v events, want one of 3", eventsPerCall(calls))
	}
}

func eventsPerCall(calls [][]*Event) []int {
	n := make([]int, len(calls))
	for i, c := range calls {
		n[i] = len(c)
	}
	return n
}

// Rounds in a row reuse the goroutines of the ones before (each started a
// goroutine that grew its stack on every call): after the first publish's
// round, the next ones start no worker.
func TestHandoffRoundsReuseTheirWorkers(t *testing.T) {
	b, bus := handoffBackend(t, time.Minute)
	h := &handled{}
	hb := attached(bus, h.handle, 4)
	e := logevent.NewEmitter(hb, b.Blobs, listeningTo("a"), 0)
	ctx := context.Background()
	for i := range 5 {
		if i > 0 {
			time.Sleep(20 * time.Millisecond) // the workers back in their wait, well within workerIdle
		}
		e.Start(ctx, event("a", `"one"`))()
		if err := e.Drain(ctx); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			continue
		}
		if n := hb.attached.Load().started.Load(); n != 2 {
			t.Fatalf("after %d rounds, %d workers started, want the first round's 2 (its handler and its watch)", i+1, n)
		}
	}
	if n := len(h.calls()); n != 5 {
		t.Errorf("%d handler calls, want 5", n)
	}
}
