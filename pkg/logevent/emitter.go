package logevent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"sync"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// Attributes set on every published bus event; subscribers filter on them.
// A bus event holds the log events of one team and one outcome.
const (
	AttrTeam   = "team_id"
	AttrStatus = "status"
)

// ClaimCheckPrefix is the blob key prefix for bodies too large for the bus.
const ClaimCheckPrefix = "claimcheck/"

// DefaultMessageBytes bounds the log events grouped into one bus event when
// the emitter has no claim-check threshold: SNS takes 256 KiB a message.
const DefaultMessageBytes = 200 << 10

// Listeners says whether anyone wants an event: a callback of its team, or a
// gateway-wide one, for its status (StatusSuccess or StatusFailure). Events
// nobody listens to are not published. It is asked for every event, before
// the publish starts, so implementations answer from a cache
// (pkg/callbacks.Catalog).
type Listeners interface {
	Listening(ctx context.Context, teamID, status string) (bool, error)
}

// ListeningFunc is a function used as Listeners.
type ListeningFunc func(ctx context.Context, teamID, status string) (bool, error)

// Listening calls f.
func (f ListeningFunc) Listening(ctx context.Context, teamID, status string) (bool, error) {
	return f(ctx, teamID, status)
}

// Emitter publishes log events on the bus. Its publishes are group
// commits: an idle emitter publishes at once, and the events emitted while
// a publish is in flight go together in the next one — concurrent calls
// share bus events (and, locally, queue transactions) instead of taking one
// each; a Lambda container, which serves one call at a time, publishes each
// at once.
type Emitter struct {
	bus        store.Bus
	blobs      store.Blobs
	listeners  Listeners
	claimCheck int // bodies above this many bytes go to the blob store

	mu      sync.Mutex
	current *publication // in flight, nil when idle
	next    *publication // what waits for the next one
}

// publication is the events of one publish, and its end.
type publication struct {
	ctx    context.Context
	events []*Event
	done   chan struct{}
}

// NewEmitter builds an emitter. listeners may be nil: nobody listens.
func NewEmitter(bus store.Bus, blobs store.Blobs, listeners Listeners, claimCheckBytes int) *Emitter {
	return &Emitter{bus: bus, blobs: blobs, listeners: listeners, claimCheck: claimCheckBytes}
}

// Start begins publishing ev and returns a function that waits for the
// publish to finish. A Lambda is frozen once it answers, so the handler must
// call the returned function before it returns; meanwhile it can write its
// answer. Whether anyone listens is asked first, synchronously (the answer
// is cached); nothing is started for an event nobody wants. Failures are
// logged, never returned: logging must not fail a call.
func (e *Emitter) Start(ctx context.Context, ev *Event) (wait func()) {
	return orNoWait(e.start(ctx, []*Event{ev}))
}

// StartAll is Start for several events, e.g. the lines of a batch: those
// someone listens to are grouped by team and outcome into as few bus
// events as their size allows (each holds up to MaxEventsPerMessage log
// events, one JSON object a line), all sent in one publish.
func (e *Emitter) StartAll(ctx context.Context, events []*Event) (wait func()) {
	return orNoWait(e.start(ctx, events))
}

// Emit publishes ev. It waits for the publish, unless ctx carries a Pending
// (Deferred, Collect), which then holds it.
func (e *Emitter) Emit(ctx context.Context, ev *Event) {
	if p, ok := ctx.Value(pendingKey{}).(*Pending); ok {
		p.add(ctx, e, ev)
		return
	}
	if wait := e.start(ctx, []*Event{ev}); wait != nil {
		wait()
	}
}

// EmitAll publishes events in one publish (StartAll) and waits for it.
func (e *Emitter) EmitAll(ctx context.Context, events []*Event) { e.StartAll(ctx, events)() }

func noWait() {}

func orNoWait(wait func()) func() {
	if wait == nil {
		return noWait
	}
	return wait
}

// start filters events by their listeners and starts the publish of the
// rest; nil when there is nothing to publish.
func (e *Emitter) start(ctx context.Context, events []*Event) (wait func()) {
	if e == nil || e.listeners == nil || len(events) == 0 {
		return nil
	}
	// The request may be cancelled (client gone) while we publish: keep going.
	ctx = context.WithoutCancel(ctx)
	wanted := events[:0:0]
	for _, ev := range events {
		team := ev.Metadata.UserAPIKeyTeamID
		ok, err := e.listeners.Listening(ctx, team, ev.Status)
		if err != nil {
			slog.ErrorContext(ctx, "log event not published: its listeners could not be read", "event_id", ev.ID, "team", team, "error", err)
			continue
		}
		if ok {
			wanted = append(wanted, ev)
		}
	}
	if len(wanted) == 0 {
		return nil
	}
	e.mu.Lock()
	p := e.next
	if p == nil {
		p = &publication{ctx: ctx, done: make(chan struct{})}
		e.next = p
	}
	p.events = append(p.events, wanted...)
	if e.current == nil {
		e.current, e.next = p, nil
		go e.run(p)
	}
	e.mu.Unlock()
	return func() { <-p.done }
}

// Drain waits until every publish started so far has finished, or ctx ends:
// the local process calls it at shutdown, as its handlers do not wait for
// their publishes.
func (e *Emitter) Drain(ctx context.Context) error {
	if e == nil {
		return nil
	}
	for {
		e.mu.Lock()
		p := e.next
		if p == nil {
			p = e.current
		}
		e.mu.Unlock()
		if p == nil {
			return nil
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("logevent: drain: %w", context.Cause(ctx))
		}
	}
}

// run publishes p, then whatever gathered meanwhile, until nothing waits.
func (e *Emitter) run(p *publication) {
	for p != nil {
		if err := e.publish(p.ctx, p.events); err != nil {
			slog.ErrorContext(p.ctx, "log events not published", "events", len(p.events), "first_event_id", p.events[0].ID, "error", err)
		}
		close(p.done)
		e.mu.Lock()
		p, e.next = e.next, nil
		e.current = p
		e.mu.Unlock()
	}
}

// publish encodes events into bus events and publishes them in one call.
func (e *Emitter) publish(ctx context.Context, events []*Event) error {
	limit := e.claimCheck
	if limit <= 0 {
		limit = DefaultMessageBytes
	}
	type group struct {
		team, status string
		bodies       [][]byte // each at most limit bytes, MaxEventsPerMessage events
		events       int      // in the last body
	}
	var groups []*group
	find := func(team, status string) *group {
		for _, g := range groups {
			if g.team == team && g.status == status {
				return g
			}
		}
		g := &group{team: team, status: status}
		groups = append(groups, g)
		return g
	}
	for _, ev := range events {
		line, err := e.encode(ctx, ev)
		if err != nil {
			// One event that cannot be encoded or claim-checked must not
			// cost the others of the group (other calls' events) theirs.
			slog.ErrorContext(ctx, "log event not published", "event_id", ev.ID, "error", err)
			continue
		}
		g := find(ev.Metadata.UserAPIKeyTeamID, ev.Status)
		last := len(g.bodies) - 1
		if last < 0 || g.events == MaxEventsPerMessage || len(g.bodies[last])+1+len(line) > limit {
			g.bodies = append(g.bodies, line)
			g.events = 1
			continue
		}
		g.bodies[last] = append(append(g.bodies[last], '\n'), line...)
		g.events++
	}
	if len(groups) == 0 {
		return nil
	}
	var out []store.Event
	for _, g := range groups {
		for _, body := range g.bodies {
			out = append(out, store.Event{Attributes: map[string]string{AttrTeam: g.team, AttrStatus: g.status}, Body: body})
		}
	}
	return e.bus.Publish(ctx, out...)
}

// encode marshals ev; when it is larger than the claim-check threshold, the
// request and response move to a blob and the event carries its key.
func (e *Emitter) encode(ctx context.Context, ev *Event) ([]byte, error) {
	body, err := marshal(ev)
	if err != nil {
		return nil, err
	}
	if e.claimCheck <= 0 || len(body) <= e.claimCheck || e.blobs == nil {
		return body, nil
	}
	payload, err := json.Marshal(ClaimedBodies{Messages: ev.Messages, Response: ev.Response})
	if err != nil {
		return nil, fmt.Errorf("encode claim-checked bodies of %s: %w", ev.ID, err)
	}
	key := ClaimCheckPrefix + ev.ID
	if _, err := e.blobs.Put(ctx, key, bytes.NewReader(payload)); err != nil {
		return nil, fmt.Errorf("store claim-checked bodies of %s: %w", ev.ID, err)
	}
	small := *ev
	small.Messages, small.Response, small.ClaimCheck = nil, nil, key
	return marshal(&small)
}

// ClaimedBodies is what a claim-check blob holds.
type ClaimedBodies struct {
	Messages json.RawMessage `json:"messages,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
}

// pendingKey carries a *Pending in a context.
type pendingKey struct{}

// Pending holds the log events emitted (Emit) under a context made by
// Deferred or Collect, until Wait.
type Pending struct {
	collect *Emitter // Collect's emitter; nil for Deferred

	mu     sync.Mutex
	waits  []func()
	events []*Event
}

// Deferred returns ctx under which Emit starts each publish at once but
// does not wait for it: p.Wait does. The HTTP edge uses it so that a
// publish overlaps with writing the answer: it writes and flushes the
// answer, then waits (before the function returns: a Lambda freezes after).
func Deferred(ctx context.Context) (_ context.Context, p *Pending) {
	p = &Pending{}
	return context.WithValue(ctx, pendingKey{}, p), p
}

// Collect returns ctx under which Emit only collects events: p.Wait
// publishes them all in one publish (StartAll) and waits for it. A caller
// that makes many calls at once — the lines of a batch — emits them in a
// few bus events instead of one each.
func (e *Emitter) Collect(ctx context.Context) (_ context.Context, p *Pending) {
	p = &Pending{collect: e}
	return context.WithValue(ctx, pendingKey{}, p), p
}

func (p *Pending) add(ctx context.Context, e *Emitter, ev *Event) {
	if p.collect != nil {
		p.mu.Lock()
		p.events = append(p.events, ev)
		p.mu.Unlock()
		return
	}
	if wait := e.start(ctx, []*Event{ev}); wait != nil {
		p.mu.Lock()
		p.waits = append(p.waits, wait)
		p.mu.Unlock()
	}
}

// Waiting reports whether Wait has anything to wait for.
func (p *Pending) Waiting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.waits) > 0 || len(p.events) > 0
}

// Wait publishes what was collected and waits for every publish started
// under p's context. p can be used again afterwards.
func (p *Pending) Wait() {
	p.mu.Lock()
	waits, events := p.waits, p.events
	p.waits, p.events = nil, nil
	p.mu.Unlock()
	if len(events) > 0 {
		waits = append(waits, p.collect.StartAll(context.Background(), events))
	}
	for _, w := range waits {
		w()
	}
}
