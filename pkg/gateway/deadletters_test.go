package gateway

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logging"
)

// countingQueue is a dead-letter queue whose length the test sets.
type countingQueue struct {
	mu sync.Mutex
	n  int
}

func (q *countingQueue) Len() (int, error) { q.mu.Lock(); defer q.mu.Unlock(); return q.n, nil }
func (q *countingQueue) set(n int)         { q.mu.Lock(); q.n = n; q.mu.Unlock() }

// TestDeadLettersRaiseAnErrorWhenTheyGrow: the local process's alarm logs
// an error at start when dead letters wait, again only when there are more.
func TestDeadLettersRaiseAnErrorWhenTheyGrow(t *testing.T) {
	logs := &syncBuffer{}
	prev := slog.Default()
	t.Cleanup(func() { slog.SetDefault(prev) })
	slog.SetDefault(logging.New(logs, "json", "info"))
	q := &countingQueue{n: 2}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchDeadLetters(ctx, q, 10*time.Millisecond); close(done) }()
	alarms := func() int { return strings.Count(logs.String(), "delivery dead-letter queue") }
	waitFor := func(n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); alarms() < n; time.Sleep(5 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("%d alarms, want %d:\n%s", alarms(), n, logs.String())
			}
		}
	}
	waitFor(1)
	time.Sleep(50 * time.Millisecond) // several checks, nothing new
	if alarms() != 1 {
		t.Fatalf("%d alarms for an unchanged queue", alarms())
	}
	q.set(3)
	waitFor(2)
	cancel()
	<-done
	if !strings.Contains(logs.String(), `"level":"ERROR"`) || !strings.Contains(logs.String(), `"messages":3`) {
		t.Errorf("logs:\n%s", logs.String())
	}
}

// TestRedriveMovesDeadLettersBack: `sluice redrive` moves what waits in the
// delivery dead-letter queue to the delivery queue.
func TestRedriveMovesDeadLettersBack(t *testing.T) {
	env := map[string]string{"SLUICE_DATA_DIR": t.TempDir(), "SLUICE_MASTER_KEY": "sk-master"}
	g, err := Open(t.Context(), func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	ctx := context.Background()
	if err := g.Backend.DeliveryDeadLetters.Send(ctx, []byte("a"), []byte("b")); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := g.Redrive(ctx, &out); err != nil || !strings.Contains(out.String(), "re-drove 2") {
		t.Fatalf("Redrive: %v, %q", err, out.String())
	}
	msgs, err := g.Backend.Deliveries.Receive(ctx, 10, time.Second)
	if err != nil || len(msgs) != 2 {
		t.Errorf("the delivery queue holds %d messages (%v), want 2", len(msgs), err)
	}
}
