package gateway_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/gateway"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// runJob runs j until the test ends (or stop is called) and reports what
// RunJob returned.
func runJob(t *testing.T, s *server.Services, j server.Job) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- gateway.RunJob(ctx, s, j) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { stop() })
	return stop
}

// TestQueueJobRunsLocally: a queue job (a test job, in no production table)
// consumes its queue of the backend with its number of workers at once, on
// both backends, and stops with the process.
func TestQueueJobRunsLocally(t *testing.T) {
	gatewaytest.Run(t, gatewaytest.Options{}, func(t *testing.T, g *gatewaytest.Gateway) {
		const workers = 3
		var mu sync.Mutex
		var bodies []string
		inFlight, maxInFlight := 0, 0
		all := make(chan struct{})
		release := make(chan struct{})
		var releaseOnce sync.Once // the workers may all be busy at once again later
		job := server.Job{
			Name: "test-worker", Queue: server.WorkQueue, Workers: workers,
			Handle: func(*server.Services) server.MessageHandler {
				return func(ctx context.Context, m store.Message) error {
					mu.Lock()
					inFlight++
					maxInFlight = max(maxInFlight, inFlight)
					full := inFlight == workers
					mu.Unlock()
					if full {
						releaseOnce.Do(func() { close(release) }) // all workers busy at once: let them go
					}
					select {
					case <-release:
					case <-ctx.Done():
						return ctx.Err()
					}
					mu.Lock()
					defer mu.Unlock()
					inFlight--
					bodies = append(bodies, string(m.Body))
					if len(bodies) == 2*workers {
						close(all)
					}
					return nil
				}
			},
		}
		var sent []string
		for i := range 2 * workers {
			sent = append(sent, fmt.Sprintf(`{"chunk":%d}`, i))
		}
		for _, b := range sent {
			if err := g.Backend.Work.Send(context.Background(), []byte(b)); err != nil {
				t.Fatal(err)
			}
		}
		stop := runJob(t, g.Services, job)
		select {
		case <-all:
		case <-time.After(30 * time.Second):
			mu.Lock()
			defer mu.Unlock()
			t.Fatalf("handled %v of %v (at most %d at once)", bodies, sent, maxInFlight)
		}
		if err := stop(); err != nil {
			t.Errorf("RunJob returned %v after its context ended, want nil", err)
		}
		mu.Lock()
		defer mu.Unlock()
		slices.Sort(bodies)
		if !slices.Equal(bodies, sent) {
			t.Errorf("handled %v, sent %v", bodies, sent)
		}
		if maxInFlight != workers {
			t.Errorf("at most %d messages at once, want the job's %d workers", maxInFlight, workers)
		}
		// Everything was acked: nothing is left to receive.
		msgs, err := g.Backend.Work.Receive(context.Background(), 10, 0)
		if err != nil || len(msgs) != 0 {
			t.Errorf("left on the queue: %v, %v", msgs, err)
		}
	})
}

// TestScheduledJobRunsLocally: a scheduled job runs at start, then at its
// local interval, until the process stops.
func TestScheduledJobRunsLocally(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{})
	runs := make(chan struct{}, 10)
	job := server.Job{
		Name: "test-sweeper", Schedule: server.Schedule{Cloud: "rate(1 hour)", Local: time.Millisecond},
		Run: func(s *server.Services) server.RunFunc {
			if s != g.Services {
				t.Error("the job was built over other services")
			}
			return func(ctx context.Context) error {
				select {
				case runs <- struct{}{}:
				default:
				}
				return fmt.Errorf("a failed run does not stop the next")
			}
		},
	}
	stop := runJob(t, g.Services, job)
	for range 3 {
		select {
		case <-runs:
		case <-time.After(10 * time.Second):
			t.Fatal("the job did not run three times")
		}
	}
	if err := stop(); err != nil {
		t.Errorf("RunJob returned %v, want nil", err)
	}
}

func TestRunJobRefusesABadDeclaration(t *testing.T) {
	g := gatewaytest.Start(t, gatewaytest.Backends()[0], gatewaytest.Options{})
	err := gateway.RunJob(context.Background(), g.Services, server.Job{Name: "nothing"})
	if err == nil {
		t.Error("RunJob ran a job without a trigger")
	}
}
