package local_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// handoffBus is a bus over one queue, as local.Open builds it.
func handoffBus(t *testing.T, dir string, visibility time.Duration) (*local.Bus, *local.Queue) {
	t.Helper()
	q, err := local.NewQueue(openDB(t, dir), "deliveries", local.QueueOptions{Visibility: visibility}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return local.NewBus(q), q
}

func decoded(t *testing.T, m store.Message) store.Event {
	t.Helper()
	e, err := store.DecodeEvent(m)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// A handed-over event is in the queue already received: no consumer can
// receive it while the caller handles it, and the caller's ack (carried by
// its next publish) removes it.
func TestHandoffIsReceivedUntilAcked(t *testing.T) {
	ctx := context.Background()
	bus, q := handoffBus(t, t.TempDir(), time.Minute)
	ev := store.Event{Attributes: map[string]string{"team_id": "t1"}, Body: []byte(`{"id":"req_1"}`)}
	msgs, err := bus.PublishHandoff(ctx, nil, []string{"msg-1"}, ev)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("PublishHandoff: %v, %d messages", err, len(msgs))
	}
	if msgs[0].ID != "msg-1" {
		t.Errorf("handed over as message %q, want the caller's ID msg-1", msgs[0].ID)
	}
	if msgs[0].Receives != 1 {
		t.Errorf("handed over at receive %d, want 1", msgs[0].Receives)
	}
	if diff := cmp.Diff(ev, decoded(t, msgs[0])); diff != "" {
		t.Errorf("handed-over message (-published +decoded):\n%s", diff)
	}
	if got, err := q.Receive(ctx, 10, 0); err != nil || len(got) != 0 {
		t.Fatalf("a consumer received %d messages (%v) while the handoff holds it", len(got), err)
	}
	if n, _ := q.Len(); n != 1 {
		t.Fatalf("queue holds %d messages, want the durable copy", n)
	}
	if _, err := bus.PublishHandoff(ctx, msgs, nil); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Len(); n != 0 {
		t.Errorf("queue holds %d messages after the ack, want 0", n)
	}
}

// What the caller does not ack comes back to the queue's consumers after
// the visibility timeout, at its second receive.
func TestHandoffNotAckedIsRedelivered(t *testing.T) {
	ctx := context.Background()
	bus, q := handoffBus(t, t.TempDir(), 50*time.Millisecond)
	if _, err := bus.PublishHandoff(ctx, nil, []string{"msg-1"}, store.Event{Body: []byte(`{"id":"req_1"}`)}); err != nil {
		t.Fatal(err)
	}
	got, err := q.Receive(ctx, 10, 2*time.Second)
	if err != nil || len(got) != 1 {
		t.Fatalf("Receive: %d messages, %v", len(got), err)
	}
	if got[0].Receives != 2 {
		t.Errorf("redelivered at receive %d, want 2", got[0].Receives)
	}
	if err := bus.AckHandoff(ctx, got); err != nil {
		t.Fatal(err)
	}
	if n, _ := q.Len(); n != 0 {
		t.Errorf("queue holds %d messages after AckHandoff, want 0", n)
	}
}

// A process that stops while handling a handed-over event leaves it to the
// next one's consumers at once.
func TestHandoffSurvivesARestart(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	db, err := local.OpenDB(filepath.Join(dir, "sluice.db"))
	if err != nil {
		t.Fatal(err)
	}
	q, err := local.NewQueue(db, "deliveries", local.QueueOptions{Visibility: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.NewBus(q).PublishHandoff(ctx, nil, []string{"msg-1"}, store.Event{Body: []byte(`{"id":"req_1"}`)}); err != nil {
		t.Fatal(err)
	}
	db.Close()

	_, q = handoffBus(t, dir, time.Hour)
	got, err := q.Receive(ctx, 10, 0)
	if err != nil || len(got) != 1 {
		t.Fatalf("after a restart: %d messages, %v; want the handed-over one", len(got), err)
	}
	if string(decoded(t, got[0]).Body) != `{"id":"req_1"}` {
		t.Errorf("body %q", decoded(t, got[0]).Body)
	}
}

// Handing over needs the one subscription whose consumer is the caller.
func TestHandoffNeedsOneSubscription(t *testing.T) {
	db := openDB(t, t.TempDir())
	var qs []*local.Queue
	for _, name := range []string{"a", "b"} {
		q, err := local.NewQueue(db, name, local.QueueOptions{}, nil)
		if err != nil {
			t.Fatal(err)
		}
		qs = append(qs, q)
	}
	if _, err := local.NewBus(qs...).PublishHandoff(context.Background(), nil, []string{"msg-1"}, store.Event{Body: []byte("x")}); err == nil {
		t.Error("handed over to two subscriptions")
	}
}

// An event and its ID go together: a publish whose IDs do not match its
// events writes nothing.
func TestHandoffNeedsAnIDPerEvent(t *testing.T) {
	bus, q := handoffBus(t, t.TempDir(), time.Minute)
	if _, err := bus.PublishHandoff(context.Background(), nil, nil, store.Event{Body: []byte("x")}); err == nil {
		t.Error("published an event without its ID")
	}
	if n, _ := q.Len(); n != 0 {
		t.Errorf("queue holds %d messages, want 0", n)
	}
}
