package batches

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Message kinds of the work queue.
const (
	kindPlan     = "plan"
	kindChunk    = "chunk"
	kindFinalize = "finalize"
)

// message is a work-queue message: ids and, for a chunk, its byte range of
// the input file — never a request body.
type message struct {
	Kind  string `json:"kind"`
	Batch string `json:"batch"`
	Chunk int    `json:"chunk"`
	Off   int64  `json:"off"`
	End   int64  `json:"end"`
}

func (s *Service) send(ctx context.Context, msgs ...message) error {
	bodies := make([][]byte, len(msgs))
	for i, m := range msgs {
		b, err := json.Marshal(m)
		if err != nil {
			return err
		}
		bodies[i] = b
	}
	if err := s.deps.Work.Send(ctx, bodies...); err != nil {
		return fmt.Errorf("batches: queue %d messages: %w", len(msgs), err)
	}
	return nil
}

// errRetry asks for the message to be delivered again after the delay it
// carries (a lease another run holds, a transient failure).
type errRetry struct {
	after time.Duration
	err   error
}

func (e *errRetry) Error() string { return e.err.Error() }
func (e *errRetry) Unwrap() error { return e.err }

// Work handles one work-queue message: the handler of the batch-worker job
// (store.Consume locally, the SQS event source in the cloud). Delivery is
// at least once, possibly twice at once: every step is idempotent, and a
// chunk's lease keeps a second run from calling providers for lines a
// first is running. While it runs it keeps the message hidden (Extend), so
// a worker that dies lets it come back within a lease. An error leaves the
// message for a later delivery; a message that names nothing (a batch or
// chunk that does not exist) is dropped.
func (s *Service) Work(ctx context.Context, m store.Message) error {
	var msg message
	if err := json.Unmarshal(m.Body, &msg); err != nil {
		slog.ErrorContext(ctx, "batches: dropped a work message that is not one", "message", m.ID, "error", err)
		return nil
	}
	log := slog.With("batch", msg.Batch, "kind", msg.Kind)
	stop := s.keepHidden(ctx, m)
	var err error
	switch msg.Kind {
	case kindPlan:
		err = s.plan(ctx, msg.Batch)
	case kindChunk:
		err = s.runChunk(ctx, msg)
	case kindFinalize:
		err = s.finalize(ctx, msg.Batch)
	default:
		log.ErrorContext(ctx, "batches: dropped a work message of an unknown kind", "message", m.ID)
	}
	stop()
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errNoBatch), errors.Is(err, errNoChunk):
		log.WarnContext(ctx, "batches: dropped a work message for something that does not exist", "message", m.ID, "error", err)
		return nil
	}
	// Come back soon, not after the visibility the message was given: a
	// lease's end, or a delay that grows with each receive.
	delay := s.opts.RetryDelay
	for range max(m.Receives-1, 0) {
		delay = min(3*delay, 15*time.Minute)
	}
	var re *errRetry
	if errors.As(err, &re) {
		delay = re.after
	}
	if xerr := s.deps.Work.Extend(context.WithoutCancel(ctx), m, delay); xerr != nil {
		log.WarnContext(ctx, "batches: could not set when the message comes back", "error", xerr)
	}
	return err
}

// keepHidden extends m's visibility to a lease (and a margin) now and every
// quarter lease, until stop: a worker that dies lets its message come back
// about when its lease ends.
func (s *Service) keepHidden(ctx context.Context, m store.Message) (stop func()) {
	hide := s.opts.Lease + s.opts.Lease/4
	extend := func() {
		if err := s.deps.Work.Extend(ctx, m, hide); err != nil && ctx.Err() == nil {
			slog.WarnContext(ctx, "batches: could not extend a work message's visibility", "message", m.ID, "error", err)
		}
	}
	extend()
	done := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		t := time.NewTicker(s.opts.Lease / 4)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-ctx.Done():
				return
			case <-t.C:
				extend()
			}
		}
	}()
	return func() { close(done); <-finished }
}

// runDeadline is when a run started now must have stopped its lines: the
// invocation's deadline less what saving its work takes (a quarter of the
// time left, at most commitReserve), and at most MaxRun from now.
func (s *Service) runDeadline(ctx context.Context) time.Time {
	now := time.Now()
	end := now.Add(s.opts.MaxRun)
	if d, ok := ctx.Deadline(); ok {
		d = d.Add(-min(commitReserve, d.Sub(now)/4))
		if d.Before(end) {
			end = d
		}
	}
	return end
}

// commitReserve is the most time a run keeps, before its invocation's
// deadline, to close its objects, commit and queue the rest.
const commitReserve = 30 * time.Second

// waitFor waits until check says done, polling with a growing interval (and
// at once when this process changes a chunk), until deadline: then it
// returns an errRetry. check returns the retry delay to use should the
// wait end.
func (s *Service) waitFor(ctx context.Context, deadline time.Time, check func() (done bool, retry time.Duration, err error)) error {
	poll := 50 * time.Millisecond
	for {
		wake := s.wake.wait()
		done, retry, err := check()
		if err != nil || done {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return &errRetry{after: retry, err: errors.New("batches: still leased by another run")}
		}
		t := time.NewTimer(min(poll, left))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-wake:
		case <-t.C:
		}
		t.Stop()
		poll = min(2*poll, 2*time.Second)
	}
}
