package gateway

import (
	"context"
	"log/slog"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/server"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// consumeRestart is how long a queue job waits before consuming again after
// its consumer stopped on an error (store.Consume already retries an
// unavailable queue itself).
const consumeRestart = 5 * time.Second

// RunJob runs job j in this process, over s, until ctx ends: a scheduled job
// now and then every Schedule.Local; a queue job on its queue of the
// backend, j.Workers messages at once (store.Consume). In the cloud the same
// handlers run as Lambda functions (pkg/gateway/lambdafn). It returns an
// error only for a job that is not well declared.
func RunJob(ctx context.Context, s *server.Services, j server.Job) error {
	if err := j.Validate(); err != nil {
		return err
	}
	log := slog.With("job", j.Name)
	if j.Queue == "" {
		run := j.Run(s)
		repeat(ctx, j.Schedule.Local, func(ctx context.Context) {
			if err := run(ctx); err != nil && ctx.Err() == nil {
				log.WarnContext(ctx, "job run failed", "error", err)
			}
		})
		return nil
	}
	q, err := j.Queue.In(s.Backend)
	if err != nil {
		return err
	}
	handle := j.Handle(s)
	if bus, ok := s.Backend.Bus.(handoffBus); ok && j.Queue == server.DeliveryQueue {
		// The emitter is in this process, on a bus that hands its events
		// over in memory (the local composition's, WithHandoff): the job
		// takes them there; the queue's consumers below take what it could
		// not.
		bus.Attach(s.DeliverEvents, j.Workers)
	}
	for {
		err := store.Consume(ctx, q, j.Workers, handle)
		if ctx.Err() != nil {
			return nil
		}
		log.ErrorContext(ctx, "job stopped consuming; restarting", "queue", string(j.Queue), "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(consumeRestart):
		}
	}
}

// handoffBus is a bus that hands the emitter's log events to the delivery
// job in memory once it is attached (pkg/handoff.Bus).
type handoffBus interface {
	Attach(handle func(ctx context.Context, m store.Message, events []*logevent.Event) error, workers int)
}

// repeat runs job now and then every interval until ctx ends.
func repeat(ctx context.Context, interval time.Duration, job func(context.Context)) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		job(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
