package server_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/files"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// TestJobsAreWellDeclared: every job of the table has one trigger with its
// handler, a name no route function or other job has, and LookupJob finds
// it.
func TestJobsAreWellDeclared(t *testing.T) {
	names := server.Functions()
	for _, j := range server.Jobs() {
		if err := j.Validate(); err != nil {
			t.Error(err)
		}
		if slices.Contains(names, j.Name) {
			t.Errorf("job %s: the name is taken by another function", j.Name)
		}
		names = append(names, j.Name)
		if got, ok := server.LookupJob(j.Name); !ok || got.Name != j.Name {
			t.Errorf("LookupJob(%q) = %v, %v", j.Name, got.Name, ok)
		}
	}
	if _, ok := server.LookupJob("health"); ok {
		t.Error("LookupJob found a route function")
	}
}

func TestJobValidate(t *testing.T) {
	run := func(*server.Services) server.RunFunc { return func(context.Context) error { return nil } }
	handle := func(*server.Services) server.MessageHandler {
		return func(context.Context, store.Message) error { return nil }
	}
	hourly := server.Schedule{Cloud: "rate(1 hour)", Local: time.Minute}
	for _, tc := range []struct {
		name string
		job  server.Job
		want string // "" for valid
	}{
		{"scheduled", server.Job{Name: "s", Schedule: hourly, Run: run}, ""},
		{"cron", server.Job{Name: "s", Schedule: server.Schedule{Cloud: "cron(0 3 * * ? *)", Local: time.Hour}, Run: run}, ""},
		{"queue", server.Job{Name: "q", Queue: server.DeliveryQueue, Workers: 2, Handle: handle}, ""},
		{"no name", server.Job{Schedule: hourly, Run: run}, "no name"},
		{"rate(1 hours)", server.Job{Name: "s", Schedule: server.Schedule{Cloud: "rate(1 hours)", Local: time.Minute}, Run: run}, "not an EventBridge"},
		{"five cron fields", server.Job{Name: "s", Schedule: server.Schedule{Cloud: "cron(0 3 * * ?)", Local: time.Minute}, Run: run}, "not an EventBridge"},
		{"no local interval", server.Job{Name: "s", Schedule: server.Schedule{Cloud: "rate(5 minutes)"}, Run: run}, "no local interval"},
		{"a schedule with a message handler", server.Job{Name: "s", Schedule: hourly, Handle: handle}, "has a Run handler and no Handle"},
		{"an unknown queue", server.Job{Name: "q", Queue: "batches", Workers: 1, Handle: handle}, `no queue "batches"`},
		{"a queue with a run handler", server.Job{Name: "q", Queue: server.WorkQueue, Workers: 1, Run: run}, "has a Handle handler and no Run"},
		{"a windowed batch of 100", server.Job{Name: "q", Queue: server.DeliveryQueue, Workers: 8, Batch: 100, BatchWindow: time.Second, Handle: handle}, ""},
		{"a batch over 10 without a window", server.Job{Name: "q", Queue: server.DeliveryQueue, Workers: 8, Batch: 11, Handle: handle}, "needs a batch window"},
		{"a batch over SQS's maximum", server.Job{Name: "q", Queue: server.DeliveryQueue, Workers: 8, Batch: 10001, BatchWindow: time.Second, Handle: handle}, "want 0 to 10000"},
		{"a window in milliseconds", server.Job{Name: "q", Queue: server.DeliveryQueue, Workers: 8, BatchWindow: 1500 * time.Millisecond, Handle: handle}, "whole seconds"},
		{"a window over 300 s", server.Job{Name: "q", Queue: server.DeliveryQueue, Workers: 8, BatchWindow: 301 * time.Second, Handle: handle}, "whole seconds up to 5m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.job.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("Validate: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("Validate: %v, want an error saying %q", err, tc.want)
			}
		})
	}
}

func TestQueueIn(t *testing.T) {
	b := &store.Backend{Work: testQueue{name: "work"}, Deliveries: testQueue{name: "deliveries"}}
	for q, want := range map[server.Queue]store.Queue{server.WorkQueue: b.Work, server.DeliveryQueue: b.Deliveries} {
		if got, err := q.In(b); err != nil || got != want {
			t.Errorf("%s.In = %v, %v; want %v", q, got, err, want)
		}
	}
}

type testQueue struct {
	store.Queue
	name string
}

// failingQueries makes every query fail, as a store that is down.
type failingQueries struct{ store.Records }

func (failingQueries) Query(context.Context, store.Query) (store.Page, error) {
	return store.Page{}, errors.New("table unavailable")
}

// TestFilesSweepJob: the files-sweep job's run removes what has expired,
// and fails (so the function's error alarm sees it) when the store does.
func TestFilesSweepJob(t *testing.T) {
	b, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	ctx := context.Background()
	job, ok := server.LookupJob("files-sweep")
	if !ok {
		t.Fatal("no files-sweep job")
	}
	later := func() time.Time { return time.Now().Add(48 * time.Hour) }
	run := func(backend *store.Backend) error {
		s, err := server.NewServices(server.Deps{Backend: backend, MasterKey: "sk-test-master-key-0123456789", Now: later})
		if err != nil {
			t.Fatal(err)
		}
		return job.Run(s)(ctx)
	}

	// A file that expires after an hour, swept two days later: its bytes
	// and records go.
	if _, err := b.Blobs.Put(ctx, "files/file-sweepme", strings.NewReader("{}\n")); err != nil {
		t.Fatal(err)
	}
	f, err := files.NewService(b.Records, b.Blobs, files.Options{}).Create(ctx, files.NewFile{Team: "team-a", Filename: "out.jsonl",
		Purpose: files.PurposeBatchOutput, Parts: []files.Part{{Key: "files/file-sweepme", Size: 3}}, ExpiresAfter: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := run(b); err != nil {
		t.Fatalf("sweep: %v", err)
	}
	if _, err := b.Blobs.Size(ctx, "files/file-sweepme"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("file %s: its bytes survived the sweep (%v)", f.ID, err)
	}

	down := *b
	down.Records = failingQueries{b.Records}
	if err := run(&down); err == nil || !strings.Contains(err.Error(), "table unavailable") {
		t.Errorf("sweep over a failing store: %v", err)
	}
}

func TestBatchSize(t *testing.T) {
	for _, tc := range []struct {
		job  server.Job
		want int
	}{
		{server.Job{Workers: 32}, 10}, // SQS's most without a window
		{server.Job{Workers: 4}, 4},
		{server.Job{Workers: 32, Batch: 100, BatchWindow: time.Second}, 100},
	} {
		if got := tc.job.BatchSize(); got != tc.want {
			t.Errorf("%+v: BatchSize() = %d, want %d", tc.job, got, tc.want)
		}
	}
}
