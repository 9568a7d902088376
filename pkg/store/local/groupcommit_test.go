package local

import (
	"context"
	"errors"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// TestConcurrentQueueWritesShareCommits: sends, receives and acks that come
// while a commit is in flight are committed together (group commit), and
// each still gets its own result.
func TestConcurrentQueueWritesShareCommits(t *testing.T) {
	db, err := OpenDB(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := NewQueue(db, "q", QueueOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const senders = 200
	before := db.commits.Load()
	var wg sync.WaitGroup
	for i := range senders {
		wg.Go(func() {
			if err := q.Send(ctx, []byte(strconv.Itoa(i))); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := db.commits.Load() - before; n >= senders/2 {
		t.Errorf("%d commits for %d concurrent sends", n, senders)
	}
	got := map[string]bool{}
	for len(got) < senders {
		msgs, err := q.Receive(ctx, 10, time.Second)
		if err != nil || len(msgs) == 0 {
			t.Fatalf("received %d of %d: %v", len(got), senders, err)
		}
		for _, m := range msgs {
			got[string(m.Body)] = true
			wg.Go(func() {
				if err := q.Ack(ctx, m); err != nil {
					t.Error(err)
				}
			})
		}
	}
	wg.Wait()
	if n, err := q.Len(); err != nil || n != 0 {
		t.Errorf("%d messages left after acking all (%v)", n, err)
	}
	// A failing update in a group fails alone.
	m := store.Message{ID: "gone", Receipt: "999999:1"}
	wg.Go(func() {
		if err := q.Extend(ctx, m, time.Second); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Extend of a gone message: %v", err)
		}
	})
	wg.Go(func() {
		if err := q.Send(ctx, []byte("after")); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	if n, _ := q.Len(); n != 1 {
		t.Errorf("%d messages after a send grouped with a failing extend, want 1", n)
	}
}

// TestStoredMessageFormats: a message round-trips through the binary form,
// and one stored as JSON by an earlier version still reads.
func TestStoredMessageFormats(t *testing.T) {
	sm := storedMessage{ID: "m-1", Body: []byte("{\"a\":\x00\xff}"), Receives: 3, VisibleAt: -5}
	got, err := decodeMessage(sm.encode())
	if err != nil || got.ID != sm.ID || string(got.Body) != string(sm.Body) || got.Receives != 3 || got.VisibleAt != -5 {
		t.Errorf("binary round trip: %+v, %v", got, err)
	}
	legacy, err := decodeMessage([]byte(`{"id":"m-2","b":"aGk=","r":2,"t":7}`))
	if err != nil || legacy.ID != "m-2" || string(legacy.Body) != "hi" || legacy.Receives != 2 || legacy.VisibleAt != 7 {
		t.Errorf("legacy JSON: %+v, %v", legacy, err)
	}
	for _, bad := range [][]byte{nil, {2}, {messageV1}, {messageV1, 1, 1, 9, 'x'}} {
		if _, err := decodeMessage(bad); err == nil {
			t.Errorf("%q decoded", bad)
		}
	}
}

func FuzzDecodeMessage(f *testing.F) {
	f.Add(storedMessage{ID: "x", Body: []byte("body"), Receives: 1, VisibleAt: 9}.encode())
	f.Add([]byte(`{"id":"m","b":"aGk="}`))
	f.Fuzz(func(t *testing.T, v []byte) {
		sm, err := decodeMessage(v)
		if err != nil || v[0] != messageV1 {
			return
		}
		again, err := decodeMessage(sm.encode())
		if err != nil || again.ID != sm.ID || string(again.Body) != string(sm.Body) || again.Receives != sm.Receives || again.VisibleAt != sm.VisibleAt {
			t.Fatalf("%+v re-encoded to %+v (%v)", sm, again, err)
		}
	})
}

// TestReceivingNothingCommitsNothing: a receive that finds no visible
// message (an idle consumer woken by a send it lost the race for, or one
// polling a queue whose messages are hidden) writes no transaction, whose
// commit would cost two fsyncs.
func TestReceivingNothingCommitsNothing(t *testing.T) {
	db, err := OpenDB(filepath.Join(t.TempDir(), "q.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	q, err := NewQueue(db, "q", QueueOptions{Visibility: time.Hour}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := q.Send(ctx, []byte("hidden soon")); err != nil {
		t.Fatal(err)
	}
	if got, err := q.Receive(ctx, 1, 0); err != nil || len(got) != 1 {
		t.Fatalf("first receive: %d, %v", len(got), err)
	}
	before := db.commits.Load()
	for range 10 {
		if got, err := q.Receive(ctx, 1, 0); err != nil || len(got) != 0 {
			t.Fatalf("receive of a hidden message: %d, %v", len(got), err)
		}
	}
	if n := db.commits.Load() - before; n != 0 {
		t.Errorf("%d commits for 10 receives that found nothing, want 0", n)
	}
}
