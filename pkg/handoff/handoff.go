// Package handoff is the local process's in-memory handoff of log events to
// its delivery job. A Bus wraps the local bus (pkg/store/local): the emitter
// (pkg/logevent) offers it each publish's events before encoding them, and
// while the callback-delivery job runs in this process (Attach), every group
// it can take (while fewer than the job's workers are busy) goes to the job's
// handler at once, as its log events are in memory — no queue transaction,
// no encoding, no receive. The delivery queue gets a copy only of what is not
// delivered within persistAfter: a handler still running then, or one that
// failed, has its events written to the queue as a message already received
// under the ID the handler was given (its progress is kept under it), hidden
// for the visibility timeout and acked once handled; a failure reaches the
// queue's consumers after the timeout, with the retries and dead letter any
// message has. Publishes linger for company first, so that the events of
// concurrent calls reach their destinations in one request. The trade: a
// crash (not a shutdown, which drains) loses the events of its last
// persistAfter that were not delivered yet.
//
// A Lambda function links none of it: only the local composition
// (functions/local, through gateway.WithHandoff) wraps its bus.
package handoff

import (
	"context"
	"crypto/rand"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// LocalBus is a bus whose subscriber runs in this process (local.Bus): it
// can publish events already received by the caller, to be handled without
// reading them back, and take the acks of those handled.
type LocalBus interface {
	store.Bus
	PublishHandoff(ctx context.Context, done []store.Message, ids []string, events ...store.Event) ([]store.Message, error)
	AckHandoff(ctx context.Context, done []store.Message) error
}

// Handler handles the log events of one bus message handed over in memory,
// as the delivery queue's job would once it read and decoded the message
// (server.Services.DeliverEvents): nil when done; an error leaves the
// message to the queue, which delivers it again after its visibility
// timeout. (Unnamed in Attach, so that gateway.RunJob asks for the method
// without linking this package.)
type Handler = func(ctx context.Context, m store.Message, events []*logevent.Event) error

// linger is how long a publish waits for more events while a handler is
// attached: at a thousand calls a second the events of a few milliseconds
// go to a destination in one request instead of one each, while a callback
// still hears of a call within milliseconds.
const linger = 20 * time.Millisecond

// persistAfter is how long handed-over events may go undelivered before
// they are written to the delivery queue: longer than a healthy destination
// takes to answer (the usual case costs no write at all), short enough that
// a crash loses little.
const persistAfter = 500 * time.Millisecond

// ackDelay bounds how long a handled message waits for a write to carry its
// ack before it is acked alone.
const ackDelay = 20 * time.Millisecond

// drainPoll is how often Drain looks whether the handlers are done.
const drainPoll = 5 * time.Millisecond

// workerIdle is how long a round's goroutine waits for the next round's
// work before it ends. Under load the next round reuses it and the stack it
// grew delivering (a goroutine started a round grew its stack on every
// call: thousands of instructions a request), while an idle process keeps
// none.
const workerIdle = time.Second

// Bus is a local bus that hands log events to the delivery job in memory
// once one is attached (logevent.Handover); until then it only publishes.
type Bus struct {
	LocalBus

	attached     atomic.Pointer[attachment]
	linger       time.Duration
	persistAfter time.Duration

	running  atomic.Int64 // handlers, rounds and ack flushes running (a count, not a WaitGroup: publishes may start while Drain waits)
	mu       sync.Mutex
	done     []store.Message // written to the queue, then handled: acked with the next write
	flushing bool            // an ack flush is scheduled
}

var _ logevent.Handover = (*Bus)(nil)

// attachment is the delivery job's handler and its free slots.
type attachment struct {
	handle  Handler
	slots   chan struct{} // one per handler running; when none is free, a publish goes to the queue only
	work    chan func()   // unbuffered: received by an idle worker
	started atomic.Int64  // workers started, for the tests
}

// do runs f on an idle worker, or on a new one when none is idle.
func (a *attachment) do(f func()) {
	select {
	case a.work <- f:
		return
	default:
	}
	a.started.Add(1)
	go a.worker(f)
}

// worker runs f, then whatever work reaches it within workerIdle.
func (a *attachment) worker(f func()) {
	idle := time.NewTimer(workerIdle)
	for {
		f()
		idle.Reset(workerIdle)
		select {
		case f = <-a.work:
		case <-idle.C:
			return
		}
	}
}

// New wraps bus.
func New(bus LocalBus) *Bus {
	return &Bus{LocalBus: bus, linger: linger, persistAfter: persistAfter}
}

// Attach has handle take the log events published from now on, up to
// workers groups at once: the callback-delivery job calls it when it starts
// consuming in this process (gateway.RunJob).
func (b *Bus) Attach(handle Handler, workers int) {
	b.attached.Store(&attachment{handle: handle, slots: make(chan struct{}, max(workers, 1)), work: make(chan func())})
}

// Linger is how long a publish waits for company: none until a handler is
// attached.
func (b *Bus) Linger() time.Duration {
	if b.attached.Load() == nil {
		return 0
	}
	return b.linger
}

// Hand cuts groups into parts of at most MaxEventsPerMessage events and
// hands as many as handlers are free to them; it returns the rest, for the
// queue's consumers. A part is not cut to the bus's message size: it goes to
// the delivery whole (the destination lanes batch it), and the local queue a
// handoff writes to takes a message of any size. encode encodes a part whole
// should it be written to the queue.
func (b *Bus) Hand(ctx context.Context, groups []logevent.Group, encode logevent.EncodeGroup) (rest []logevent.Group) {
	a := b.attached.Load()
	if a == nil {
		return groups
	}
	var parts []logevent.Group
	for _, g := range groups {
		for len(g.Events) > logevent.MaxEventsPerMessage {
			parts = append(parts, logevent.Group{Team: g.Team, Status: g.Status, Events: g.Events[:logevent.MaxEventsPerMessage]})
			g.Events = g.Events[logevent.MaxEventsPerMessage:]
		}
		parts = append(parts, g)
	}
	n := 0
	for n < len(parts) {
		select {
		case a.slots <- struct{}{}:
			n++
			continue
		default:
		}
		break
	}
	if n == 0 {
		return parts
	}
	r := &round{b: b, a: a, encode: encode, left: n, allDone: make(chan struct{})}
	b.running.Add(int64(n) + 1)
	for _, g := range parts[:n] {
		p := &handed{Group: g, msg: store.Message{ID: rand.Text(), Receives: 1}}
		r.parts = append(r.parts, p)
		a.do(func() { r.run(p) })
	}
	a.do(func() { r.watch(ctx) })
	return parts[n:]
}

// round is the groups of one publish handed over, until each is delivered
// or written to the queue.
type round struct {
	b      *Bus
	a      *attachment
	encode logevent.EncodeGroup // encodes what is written to the queue

	mu      sync.Mutex
	parts   []*handed
	left    int           // handlers still running
	allDone chan struct{} // closed when left reaches 0
}

// handed is one group handed over: a message of the delivery queue that
// exists only in memory until it is written (persisted set).
type handed struct {
	logevent.Group
	msg       store.Message // what the handler is given: an ID, receive 1
	finished  bool
	failed    bool
	persisted *store.Message // the queue's copy, with its receipt
}

// run handles one handed-over group; once written to the queue and
// handled, it is acked.
func (r *round) run(p *handed) {
	defer r.b.running.Add(-1)
	defer func() { <-r.a.slots }()
	handle := func(ctx context.Context, m store.Message) error { return r.a.handle(ctx, m, p.Events) }
	err := store.RunHandler(context.Background(), handle, p.msg)
	r.mu.Lock()
	p.finished, p.failed = true, err != nil
	persisted := p.persisted
	if r.left--; r.left == 0 {
		close(r.allDone)
	}
	r.mu.Unlock()
	if persisted != nil && err == nil {
		r.b.queueAcks(*persisted)
	}
}

// watch writes to the queue the groups of the round not delivered within
// persistAfter — still being handled, or failed — as messages already
// received, so that a failure is retried and a crash leaves them to the
// next start; it acks those handled meanwhile.
func (r *round) watch(ctx context.Context) {
	defer r.b.running.Add(-1)
	wait := time.NewTimer(r.b.persistAfter)
	select {
	case <-r.allDone:
		wait.Stop()
	case <-wait.C:
	}
	keep := r.undelivered()
	if len(keep) == 0 {
		return
	}
	// One message a part, under the ID its handler was given and named by
	// it (spend counts the part once by that name, whichever copy it
	// handles): the local queue takes a message of any size, and a part
	// holds at most MaxEventsPerMessage events.
	var written []*handed
	ids := make([]string, 0, len(keep))
	out := make([]store.Event, 0, len(keep))
	for _, p := range keep {
		ev, err := r.encode(ctx, p.Group, p.msg.ID)
		if err != nil {
			slog.ErrorContext(ctx, "log events not written to the delivery queue: delivered only if their handler succeeds", "events", len(p.Events), "error", err)
			continue
		}
		out = append(out, ev)
		written, ids = append(written, p), append(ids, p.msg.ID)
	}
	if len(written) == 0 {
		return
	}
	done := r.b.takeDone()
	msgs, err := r.b.PublishHandoff(ctx, done, ids, out...)
	if err != nil {
		r.b.putBack(done)
		slog.ErrorContext(ctx, "log events not written to the delivery queue: delivered only if their handler succeeds", "messages", len(written), "error", err)
		return
	}
	var acks []store.Message
	r.mu.Lock()
	for i, p := range written {
		p.persisted = &msgs[i]
		if p.finished && !p.failed {
			acks = append(acks, msgs[i])
		}
	}
	r.mu.Unlock()
	r.b.queueAcks(acks...)
}

// undelivered is the round's parts still being handled, or failed.
func (r *round) undelivered() []*handed {
	r.mu.Lock()
	defer r.mu.Unlock()
	var keep []*handed
	for _, p := range r.parts {
		if !p.finished || p.failed {
			keep = append(keep, p)
		}
	}
	return keep
}

// queueAcks queues the acks of msgs for the next write, or for ackDelay.
func (b *Bus) queueAcks(msgs ...store.Message) {
	if len(msgs) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.done = append(b.done, msgs...)
	if !b.flushing {
		b.flushing = true
		b.running.Add(1) // Drain waits for the flush: its acks may be in flight
		time.AfterFunc(ackDelay, b.flush)
	}
}

func (b *Bus) takeDone() []store.Message {
	b.mu.Lock()
	defer b.mu.Unlock()
	done := b.done
	b.done = nil
	return done
}

func (b *Bus) putBack(done []store.Message) {
	b.mu.Lock()
	b.done = append(b.done, done...)
	b.mu.Unlock()
}

// flush acks what no write has carried since it was handled.
func (b *Bus) flush() {
	defer b.running.Add(-1)
	b.mu.Lock()
	b.flushing = false
	b.mu.Unlock()
	if err := b.ack(context.Background()); err != nil {
		// Not acked: delivered again after the visibility timeout;
		// the destinations drop what they already have.
		slog.Warn("handed-over log events not acked; they will be delivered again", "error", err)
	}
}

func (b *Bus) ack(ctx context.Context) error {
	done := b.takeDone()
	if len(done) == 0 {
		return nil
	}
	if err := b.AckHandoff(ctx, done); err != nil {
		b.putBack(done)
		return err
	}
	return nil
}

// Drain waits for the running handlers, rounds and ack flushes, then acks
// what they handled: the emitter's Drain calls it at shutdown.
func (b *Bus) Drain(ctx context.Context) error {
	tick := time.NewTicker(drainPoll)
	defer tick.Stop()
	for b.running.Load() > 0 {
		select {
		case <-tick.C:
		case <-ctx.Done():
			return fmt.Errorf("handoff: drain: log events still being delivered: %w", context.Cause(ctx))
		}
	}
	return b.ack(ctx)
}

// Wrap returns bus as a Bus when it is a local bus (the embedded backend's),
// else bus itself (the AWS adapters': their subscriber is another function).
func Wrap(bus store.Bus) store.Bus {
	if l, ok := bus.(LocalBus); ok {
		return New(l)
	}
	return bus
}
