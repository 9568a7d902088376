package local_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
	"github.com/sluice-gateway/sluice/pkg/store/storetest"
)

func openDB(t *testing.T, dir string) *local.DB {
	t.Helper()
	db, err := local.OpenDB(filepath.Join(dir, "sluice.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func newRecords(t *testing.T) store.Records {
	r, err := local.NewRecords(openDB(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func newQueues(t *testing.T, cfg storetest.QueueConfig) (q, dead store.Queue) {
	db := openDB(t, t.TempDir())
	d, err := local.NewQueue(db, "dead", local.QueueOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lq, err := local.NewQueue(db, "q", local.QueueOptions{Visibility: cfg.Visibility, MaxReceives: cfg.MaxReceives}, d)
	if err != nil {
		t.Fatal(err)
	}
	return lq, d
}

// The conformance suites, run exactly as the AWS adapters run them.

func TestRecords(t *testing.T) { storetest.Records(t, newRecords) }

func TestBlobs(t *testing.T) {
	storetest.Blobs(t, func(t *testing.T) store.Blobs {
		b, err := local.NewBlobs(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return b
	})
}

func TestQueue(t *testing.T) { storetest.Queue(t, newQueues) }

func TestBus(t *testing.T) {
	storetest.Bus(t, func(t *testing.T) (store.Bus, store.Queue) {
		sub, _ := newQueues(t, storetest.QueueConfig{Visibility: time.Minute, MaxReceives: 5})
		return local.NewBus(sub.(*local.Queue)), sub
	})
}

func TestLimiter(t *testing.T) {
	storetest.Limiter(t, func(*testing.T) store.Limiter { return local.NewLimiter() })
}

func TestSealer(t *testing.T) {
	storetest.Sealer(t, func(t *testing.T) store.Sealer {
		s, err := local.OpenSealer(filepath.Join(t.TempDir(), "sealer.key"))
		if err != nil {
			t.Fatal(err)
		}
		return s
	})
}

// Local-only behaviour.

func TestOpenBuildsBackend(t *testing.T) {
	ctx := t.Context()
	b, err := local.Open(filepath.Join(t.TempDir(), "data"), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if b.Records == nil || b.Blobs == nil || b.Work == nil || b.Bus == nil || b.Deliveries == nil ||
		b.Limiter == nil || b.Sealer == nil || b.Ping == nil || b.Close == nil {
		t.Fatalf("incomplete backend: %+v", b)
	}
	if err := b.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	// The bus feeds the deliveries queue.
	want := store.Event{Attributes: map[string]string{"team": "t1"}, Body: []byte(`{"id":"req_1"}`)}
	if err := b.Bus.Publish(ctx, want); err != nil {
		t.Fatal(err)
	}
	msgs, err := b.Deliveries.Receive(ctx, 10, time.Second)
	if err != nil || len(msgs) != 1 {
		t.Fatalf("Deliveries.Receive: %d messages, %v", len(msgs), err)
	}
	if got, err := store.DecodeEvent(msgs[0]); err != nil || !bytes.Equal(got.Body, want.Body) || got.Attributes["team"] != "t1" {
		t.Fatalf("delivered event %+v, %v", got, err)
	}
	// Work and Deliveries are separate queues.
	if msgs, _ := b.Work.Receive(ctx, 10, 0); len(msgs) != 0 {
		t.Fatalf("work queue received a bus event")
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Ping(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Ping after Close: %v, want ErrUnavailable", err)
	}
}

func TestRestartKeepsRecordsAndQueue(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	opts := local.Options{Work: local.QueueOptions{Visibility: time.Hour}}
	b, err := local.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	rec := store.Record{Key: store.Key{PK: "BATCH#1", SK: "BATCH"}, GSI1: store.IndexKey{PK: "OWNER#a#BATCH", SK: "1"},
		Status: "in_progress", Counters: map[string]int64{"done": 3}, Body: []byte("body")}
	if err := b.Records.Put(ctx, rec, store.Cond{Absent: true}); err != nil {
		t.Fatal(err)
	}
	if err := b.Work.Send(ctx, []byte("in flight"), []byte("waiting")); err != nil {
		t.Fatal(err)
	}
	inFlight, err := b.Work.Receive(ctx, 1, 0)
	if err != nil || len(inFlight) != 1 {
		t.Fatalf("Receive: %v %v", inFlight, err)
	}
	sealed, err := b.Sealer.Seal(ctx, []byte("secret"), map[string]string{"team": "t"})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b, err = local.Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	got, err := b.Records.Get(ctx, rec.Key)
	if err != nil || got.Status != "in_progress" || got.Counters["done"] != 3 || got.Version != 1 {
		t.Fatalf("record after restart: %+v, %v", got, err)
	}
	page, err := b.Records.Query(ctx, store.Query{Index: store.GSI1, PK: "OWNER#a#BATCH", Limit: 10})
	if err != nil || len(page.Records) != 1 {
		t.Fatalf("index after restart: %+v, %v", page, err)
	}
	// Both messages are back at once: the in-flight one's lease died with
	// the process that held it (its visibility was an hour), and it keeps
	// its receive count.
	msgs, err := b.Work.Receive(ctx, 10, 0)
	if err != nil || len(msgs) != 2 {
		t.Fatalf("after restart received %d messages (%v), want 2", len(msgs), err)
	}
	receives := map[string]int{}
	for _, m := range msgs {
		receives[string(m.Body)] = m.Receives
	}
	if receives["in flight"] != 2 || receives["waiting"] != 1 {
		t.Fatalf("receive counts after restart: %v", receives)
	}
	// The old receipt is stale: its Ack leaves the message alone.
	if err := b.Work.Ack(ctx, inFlight[0]); err != nil {
		t.Fatal(err)
	}
	if pt, err := b.Sealer.Open(ctx, sealed, map[string]string{"team": "t"}); err != nil || string(pt) != "secret" {
		t.Fatalf("Open after restart (the key file is reused): %q, %v", pt, err)
	}
}

func TestSealerKeyFile(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "sealer.key")
	s, err := local.OpenSealer(path)
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 || fi.Size() != 32 {
		t.Fatalf("key file: mode %v size %d, want 0600 and 32 bytes", fi.Mode().Perm(), fi.Size())
	}
	sealed, err := s.Seal(ctx, []byte("x"), nil)
	if err != nil {
		t.Fatal(err)
	}
	env, err := store.ParseEnvelope(sealed)
	if err != nil || env.Scheme != store.SchemeLocal {
		t.Fatalf("sealed bytes: %+v, %v", env, err)
	}

	// Another master key cannot open it.
	other, err := local.OpenSealer(filepath.Join(t.TempDir(), "sealer.key"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Open(ctx, sealed, nil); err == nil {
		t.Fatal("a sealer with another master key opened the secret")
	}

	// A key file others can read is refused, as is a short one.
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := local.OpenSealer(path); err == nil {
		t.Fatal("OpenSealer accepted a world-readable key file")
	}
	short := filepath.Join(t.TempDir(), "short.key")
	if err := os.WriteFile(short, []byte("short"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := local.OpenSealer(short); err == nil {
		t.Fatal("OpenSealer accepted a short key file")
	}
}

func TestBlobKeysStayInside(t *testing.T) {
	ctx := t.Context()
	dir := t.TempDir()
	root := filepath.Join(dir, "blobs")
	b, err := local.NewBlobs(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{"..", "../escape", "a/../../escape", ".", "./x", "@data", "a/@data", "/abs", "a\\..\\b", "x\x00y", "%2e%2e/x", "~/x"} {
		n, err := b.Put(ctx, key, bytes.NewReader([]byte(key)))
		if err != nil {
			continue // refusing a key is fine
		}
		if n != int64(len(key)) {
			t.Fatalf("Put %q: %d bytes", key, n)
		}
		rc, err := b.Get(ctx, key, 0, -1)
		if err != nil {
			t.Fatalf("Get %q after Put: %v", key, err)
		}
		rc.Close()
	}
	// Everything written is under the blob root.
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 || entries[0].Name() != "blobs" {
		t.Fatalf("files escaped the blob root: %v", entries)
	}
	for _, key := range []string{"", "a//b", "a/", string(make([]byte, 1025))} {
		if _, err := b.Put(ctx, key, bytes.NewReader(nil)); err == nil {
			t.Fatalf("Put %q succeeded, want an invalid key error", key)
		}
	}
	// "a" and "a/b" are distinct objects, as on S3; deleting one keeps the other.
	for _, key := range []string{"a", "a/b"} {
		if _, err := b.Put(ctx, key, bytes.NewReader([]byte(key))); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.Delete(ctx, "a/b"); err != nil {
		t.Fatal(err)
	}
	if n, err := b.Size(ctx, "a"); err != nil || n != 1 {
		t.Fatalf("Size a after deleting a/b: %d, %v", n, err)
	}
}

func TestQueueConcurrentConsumers(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	q, _ := newQueues(t, storetest.QueueConfig{Visibility: time.Minute, MaxReceives: 5})
	const producers, perProducer, consumers = 6, 25, 6
	var seen sync.Map
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				if err := q.Send(ctx, fmt.Appendf(nil, "%d-%d", p, i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	var received sync.WaitGroup
	received.Add(producers * perProducer)
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var consumersDone sync.WaitGroup
	for range consumers {
		consumersDone.Go(func() {
			for cctx.Err() == nil {
				msgs, err := q.Receive(cctx, 3, 200*time.Millisecond)
				if err != nil {
					return
				}
				for _, m := range msgs {
					if _, dup := seen.LoadOrStore(string(m.Body), true); dup {
						t.Errorf("message %q received twice", m.Body)
					}
					if err := q.Ack(ctx, m); err != nil {
						t.Error(err)
					}
					received.Done()
				}
			}
		})
	}
	wg.Wait()
	done := make(chan struct{})
	go func() { received.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("not every message was received")
	}
	cancel()
	consumersDone.Wait()
}

func TestQueueReceiveStopsOnContextAndClose(t *testing.T) {
	db := openDB(t, t.TempDir())
	q, err := local.NewQueue(db, "q", local.QueueOptions{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := q.Receive(ctx, 1, time.Minute); !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Fatalf("Receive with a short ctx: %v after %s", err, time.Since(start))
	}
	go func() {
		time.Sleep(100 * time.Millisecond)
		db.Close()
	}()
	start = time.Now()
	if _, err := q.Receive(t.Context(), 1, time.Minute); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("Receive across Close: %v after %s", err, time.Since(start))
	}
}

func TestConsumeWithLocalQueue(t *testing.T) {
	q, dead := newQueues(t, storetest.QueueConfig{Visibility: 200 * time.Millisecond, MaxReceives: 2})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := q.Send(ctx, []byte("ok"), []byte("poison")); err != nil {
		t.Fatal(err)
	}
	handled := make(chan string, 10)
	done := make(chan error, 1)
	go func() {
		done <- store.Consume(ctx, q, 2, func(_ context.Context, m store.Message) error {
			handled <- string(m.Body)
			if string(m.Body) == "poison" {
				return errors.New("cannot handle")
			}
			return nil
		})
	}()
	// The poison message fails twice, then lands in the dead-letter queue.
	msgs, err := dead.Receive(ctx, 1, 10*time.Second)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "poison" {
		t.Fatalf("dead letter: %v %v", msgs, err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Consume: %v", err)
	}
	counts := map[string]int{}
	for len(handled) > 0 {
		counts[<-handled]++
	}
	if counts["ok"] != 1 || counts["poison"] != 2 {
		t.Fatalf("handled %v, want ok once and poison twice", counts)
	}
}
