package storetest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// QueueConfig is the configuration the Queue suite asks open for.
type QueueConfig struct {
	Visibility  time.Duration // how long a received message stays hidden
	MaxReceives int           // receives after which the next receive moves a message to the dead-letter queue
}

// Queue runs the conformance suite for store.Queue. open returns a queue
// configured by cfg and its dead-letter queue.
//
// Besides what store.go documents, it pins down: a message's ID stays the same
// across redeliveries; Receives counts every receive, this one included; after
// MaxReceives receives, the message is not received again from q but moves to
// the dead-letter queue (SQS's redrive rule: the move happens on a later
// receive from q); Ack and Extend work with the receipt of the latest receive.
func Queue(t *testing.T, open func(t *testing.T, cfg QueueConfig) (q, deadLetter store.Queue)) {
	cases := []struct {
		name string
		cfg  QueueConfig
		run  func(t *testing.T, ctx context.Context, q, dead store.Queue, cfg QueueConfig)
	}{
		{"SendReceiveAck", QueueConfig{time.Second, 5}, queueSendReceiveAck},
		{"EmptyReceiveIsBounded", QueueConfig{time.Second, 5}, queueEmptyReceive},
		{"ReceiveWakesOnSend", QueueConfig{time.Second, 5}, queueWakesOnSend},
		{"SendBatch", QueueConfig{2 * time.Second, 5}, queueSendBatch},
		{"Redelivery", QueueConfig{time.Second, 5}, queueRedelivery},
		{"DeadLetter", QueueConfig{time.Second, 2}, queueDeadLetter},
		{"Extend", QueueConfig{time.Second, 5}, queueExtend},
		{"Redrive", QueueConfig{time.Second, 5}, queueRedrive},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			q, dead := open(t, c.cfg)
			c.run(t, testCtx(t, time.Minute), q, dead, c.cfg)
		})
	}
}

// receiveN receives until it has n messages or the deadline passes; it fails
// the test if it gets more than n, or fewer in time.
func receiveN(t *testing.T, ctx context.Context, q store.Queue, n int, within time.Duration) []store.Message {
	t.Helper()
	var got []store.Message
	deadline := time.Now().Add(within)
	for len(got) < n && time.Now().Before(deadline) {
		msgs, err := q.Receive(ctx, min(10, n-len(got)), time.Second)
		ok(t, err, "Receive")
		got = append(got, msgs...)
	}
	if len(got) != n {
		t.Fatalf("received %d messages within %s, want %d", len(got), within, n)
	}
	for _, m := range got {
		if m.ID == "" || m.Receipt == "" {
			t.Fatalf("received message without ID or receipt: %+v", m)
		}
	}
	return got
}

// receiveNone fails the test if a receive waiting wait gets a message.
func receiveNone(t *testing.T, ctx context.Context, q store.Queue, wait time.Duration, why string) {
	t.Helper()
	msgs, err := q.Receive(ctx, 10, wait)
	ok(t, err, "Receive")
	if len(msgs) > 0 {
		t.Fatalf("%s: received %q (receive %d)", why, msgs[0].Body, msgs[0].Receives)
	}
}

func wantMessage(t *testing.T, m store.Message, body []byte, receives int) {
	t.Helper()
	if !bytes.Equal(m.Body, body) || m.Receives != receives {
		t.Fatalf("got message %q at receive %d, want %q at receive %d", m.Body, m.Receives, body, receives)
	}
}

func queueSendReceiveAck(t *testing.T, ctx context.Context, q, _ store.Queue, cfg QueueConfig) {
	ok(t, q.Send(ctx), "Send of nothing")
	body := []byte(`{"kind":"plan","batch":"batch_` + uniq() + `"}`)
	ok(t, q.Send(ctx, body), "Send")
	m := receiveN(t, ctx, q, 1, 10*time.Second)[0]
	wantMessage(t, m, body, 1)
	ok(t, q.Ack(ctx, m), "Ack")
	receiveNone(t, ctx, q, cfg.Visibility+time.Second, "an acked message came back")
}

func queueEmptyReceive(t *testing.T, ctx context.Context, q, _ store.Queue, _ QueueConfig) {
	start := time.Now()
	receiveNone(t, ctx, q, time.Second, "empty queue")
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("a receive waiting 1s on an empty queue took %s", d)
	}
}

func queueWakesOnSend(t *testing.T, ctx context.Context, q, _ store.Queue, _ QueueConfig) {
	const wait = 10 * time.Second
	type result struct {
		msgs []store.Message
		err  error
		took time.Duration
	}
	res := make(chan result, 1)
	go func() {
		start := time.Now()
		msgs, err := q.Receive(ctx, 10, wait)
		res <- result{msgs, err, time.Since(start)}
	}()
	time.Sleep(300 * time.Millisecond) // let the receive start waiting
	body := []byte("wake up")
	ok(t, q.Send(ctx, body), "Send")
	r := <-res
	ok(t, r.err, "Receive")
	if len(r.msgs) != 1 || r.took > wait/2 {
		t.Fatalf("a long poll got %d messages after %s, want the one sent after 300ms, promptly", len(r.msgs), r.took)
	}
	wantMessage(t, r.msgs[0], body, 1)
	ok(t, q.Ack(ctx, r.msgs[0]), "Ack")
}

func queueSendBatch(t *testing.T, ctx context.Context, q, _ store.Queue, _ QueueConfig) {
	const n = 25 // more than SQS's 10 per batch
	bodies := make([][]byte, n)
	want := make(map[string]bool, n)
	for i := range bodies {
		bodies[i] = fmt.Appendf(nil, `{"kind":"chunk","n":%d}`, i)
		want[string(bodies[i])] = true
	}
	ok(t, q.Send(ctx, bodies...), "Send of 25")
	msgs := receiveN(t, ctx, q, n, 15*time.Second)
	ids := make(map[string]bool, n)
	for _, m := range msgs {
		if !want[string(m.Body)] || ids[m.ID] {
			t.Fatalf("unexpected or repeated message %s %q", m.ID, m.Body)
		}
		delete(want, string(m.Body))
		ids[m.ID] = true
		ok(t, q.Ack(ctx, m), "Ack")
	}
}

func queueRedelivery(t *testing.T, ctx context.Context, q, _ store.Queue, _ QueueConfig) {
	body := []byte("not acked")
	ok(t, q.Send(ctx, body), "Send")
	first := receiveN(t, ctx, q, 1, 10*time.Second)[0]
	wantMessage(t, first, body, 1)
	receiveNone(t, ctx, q, 0, "a received message was not hidden")
	second := receiveN(t, ctx, q, 1, 10*time.Second)[0]
	wantMessage(t, second, body, 2)
	if second.ID != first.ID {
		t.Fatalf("redelivered message has ID %s, was %s", second.ID, first.ID)
	}
	ok(t, q.Ack(ctx, second), "Ack with the latest receipt")
	receiveNone(t, ctx, q, 2*time.Second, "an acked message came back")
}

func queueDeadLetter(t *testing.T, ctx context.Context, q, dead store.Queue, cfg QueueConfig) {
	body := []byte("poison")
	ok(t, q.Send(ctx, body), "Send")
	for i := 1; i <= cfg.MaxReceives; i++ {
		wantMessage(t, receiveN(t, ctx, q, 1, 10*time.Second)[0], body, i)
	}
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		receiveNone(t, ctx, q, time.Second, fmt.Sprintf("received after %d receives", cfg.MaxReceives))
		msgs, err := dead.Receive(ctx, 10, time.Second)
		ok(t, err, "Receive from the dead-letter queue")
		if len(msgs) > 0 {
			if len(msgs) != 1 || !bytes.Equal(msgs[0].Body, body) {
				t.Fatalf("dead-letter queue holds %d messages, first %q; want only %q", len(msgs), msgs[0].Body, body)
			}
			ok(t, dead.Ack(ctx, msgs[0]), "Ack on the dead-letter queue")
			return
		}
	}
	t.Fatal("the message never reached the dead-letter queue")
}

func queueExtend(t *testing.T, ctx context.Context, q, _ store.Queue, _ QueueConfig) {
	body := []byte("long job")
	ok(t, q.Send(ctx, body), "Send")
	m := receiveN(t, ctx, q, 1, 10*time.Second)[0]
	ok(t, q.Extend(ctx, m, 4*time.Second), "Extend")
	receiveNone(t, ctx, q, 2*time.Second, "an extended message came back within its extension")
	again := receiveN(t, ctx, q, 1, 10*time.Second)[0]
	wantMessage(t, again, body, 2)
	ok(t, q.Ack(ctx, again), "Ack")
}

// queueRedrive: what waits in the dead-letter queue (sent there, as the
// delivery worker does) goes back to the queue, unchanged, and leaves the
// dead-letter queue.
func queueRedrive(t *testing.T, ctx context.Context, q, dead store.Queue, _ QueueConfig) {
	bodies := [][]byte{[]byte("dead one"), []byte("dead two")}
	ok(t, dead.Send(ctx, bodies...), "Send to the dead-letter queue")
	n, err := store.Redrive(ctx, dead, q)
	ok(t, err, "Redrive")
	if n != 2 {
		t.Fatalf("Redrive moved %d messages, want 2", n)
	}
	got := map[string]bool{}
	for _, m := range receiveN(t, ctx, q, 2, 10*time.Second) {
		got[string(m.Body)] = true
		ok(t, q.Ack(ctx, m), "Ack")
	}
	if !got["dead one"] || !got["dead two"] {
		t.Fatalf("redriven bodies %v", got)
	}
	receiveNone(t, ctx, dead, time.Second, "the dead-letter queue kept a redriven message")
}
