package logevent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Attributes set on every published bus event; subscribers filter on them.
// A bus event holds the log events of one team and one outcome.
const (
	AttrTeam   = "team_id"
	AttrStatus = "status"
	// AttrMessage names a bus event the emitter published: the ID of its
	// first log event. Every copy of it (a publish retried, the bus's and
	// the queue's redeliveries) carries the same name and the same events,
	// so spend counts the message once by its name (pkg/spend). Events
	// handed over in memory are named by the handoff's message ID, which
	// their queue copy carries too (EncodeGroup).
	AttrMessage = "message"
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
	// ListeningEither is Listening for either status in one question:
	// WantsBodies asks it on every call.
	ListeningEither(ctx context.Context, teamID string) (bool, error)
}

// ListeningFunc is a function used as Listeners.
type ListeningFunc func(ctx context.Context, teamID, status string) (bool, error)

// Listening calls f.
func (f ListeningFunc) Listening(ctx context.Context, teamID, status string) (bool, error) {
	return f(ctx, teamID, status)
}

// ListeningEither calls f for each status, until one listens or fails.
func (f ListeningFunc) ListeningEither(ctx context.Context, teamID string) (bool, error) {
	for _, status := range [...]string{StatusSuccess, StatusFailure} {
		if ok, err := f(ctx, teamID, status); ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}

// Observer sees every log event emitted, whether or not anyone listens to
// it (pkg/metrics records its measurements from it). It must not keep the
// event or change it.
type Observer interface {
	ObserveEvent(ctx context.Context, ev *Event)
}

// Emitter publishes log events on the bus. Its publishes are group
// commits: an idle emitter publishes at once, and the events emitted while
// a publish is in flight go together in the next one — concurrent calls
// share bus events (and, locally, queue transactions) instead of taking one
// each; a Lambda container, which serves one call at a time, publishes each
// at once. On a bus that is also a Handover (the local process's,
// pkg/handoff), it offers what it publishes to the bus in memory first.
type Emitter struct {
	bus        store.Bus
	blobs      store.Blobs
	listeners  Listeners
	pricer     Pricer // nil: events are not priced, nor published for spend
	claimCheck int    // bodies above this many bytes go to the blob store
	observers  []Observer

	mu      sync.Mutex
	running bool         // a run loop is publishing
	current *publication // in flight, nil when idle
	next    *publication // what waits for the next one
	// handover is the bus as a Handover, nil when it is not one.
	handover Handover
}

// Handover is a bus that takes log events in memory, before they are
// encoded for it: the local process's handoff to its delivery job
// (pkg/handoff). The emitter offers it every publish's events, grouped by
// team and outcome, and publishes on the bus what it does not take.
type Handover interface {
	// Linger is how long a publish waits for company before it starts,
	// so that the events of concurrent calls go together (0: none).
	Linger() time.Duration
	// Hand takes the groups it can handle now and returns the rest.
	// encode encodes a group whole (claim checks included) under the
	// name its handler was given, should it write the group to its queue
	// later.
	Hand(ctx context.Context, groups []Group, encode EncodeGroup) (rest []Group)
	// Drain waits until what it took is handled, or ctx ends.
	Drain(ctx context.Context) error
}

// Group is the log events of one team and outcome, as a Handover takes them.
type Group struct {
	Team, Status string
	Events       []*Event
}

// EncodeGroup encodes g's events whole into one bus event named name
// (AttrMessage). All or nothing: the copy of a message counted by its name
// must hold the same events in the same order (pkg/spend), so an event that
// cannot be encoded fails the group.
type EncodeGroup func(ctx context.Context, g Group, name string) (store.Event, error)

// publication is the events of one publish, and its end.
type publication struct {
	ctx    context.Context
	events []*Event
	done   chan struct{}
	// hurry is closed when a caller waits for the publish: a lingering
	// publish then starts at once (callers that wait, such as a batch
	// chunk's, must not pay the linger).
	hurry     chan struct{}
	hurryOnce sync.Once
}

// wait waits for p's publish, cutting its linger short.
func (p *publication) wait() {
	p.hurryOnce.Do(func() { close(p.hurry) })
	<-p.done
}

// Pricer prices a call's log event before it is published (pkg/spend): it
// sets ResponseCost, CostUnknown and CostEstimated from the event's model
// and tokens, and settles what the call reserved against its budgets.
type Pricer interface {
	Price(ctx context.Context, ev *Event)
	// Quote is what ev would cost, and whether its model has a price,
	// changing and settling nothing (the x-litellm-response-cost header).
	Quote(ev *Event) (cost float64, known bool)
}

// SetPricer has every event priced by p before it is published, and
// published whether or not a callback listens: spend counts every call.
// Call it before the first emit.
func (e *Emitter) SetPricer(p Pricer) { e.pricer = p }

// Quote is what ev would cost (Pricer.Quote); not known without a pricer.
func (e *Emitter) Quote(ev *Event) (float64, bool) {
	if e == nil || e.pricer == nil {
		return 0, false
	}
	return e.pricer.Quote(ev)
}

func (e *Emitter) price(ctx context.Context, events []*Event) {
	if e == nil || e.pricer == nil {
		return
	}
	for _, ev := range events {
		e.pricer.Price(ctx, ev)
	}
}

// NewEmitter builds an emitter. listeners may be nil: nobody listens. A bus
// that is a Handover is offered the events in memory first.
func NewEmitter(bus store.Bus, blobs store.Blobs, listeners Listeners, claimCheckBytes int) *Emitter {
	h, _ := bus.(Handover)
	return &Emitter{bus: bus, blobs: blobs, listeners: listeners, claimCheck: claimCheckBytes, handover: h}
}

// Observe has o see every event emitted from now on. Call it before the
// first Emit.
func (e *Emitter) Observe(o Observer) { e.observers = append(e.observers, o) }

// Start begins publishing ev and returns a function that waits for the
// publish to finish. A Lambda is frozen once it answers, so the handler must
// call the returned function before it returns; meanwhile it can write its
// answer. Whether anyone listens is asked first, synchronously (the answer
// is cached); nothing is started for an event nobody wants. Failures are
// logged, never returned: logging must not fail a call.
func (e *Emitter) Start(ctx context.Context, ev *Event) (wait func()) {
	e.price(ctx, []*Event{ev})
	return e.start(ctx, []*Event{ev}).waiter()
}

// StartAll is Start for several events, e.g. the lines of a batch: those
// someone listens to are grouped by team and outcome into as few bus
// events as their size allows (each holds up to MaxEventsPerMessage log
// events, one JSON object a line), all sent in one publish.
func (e *Emitter) StartAll(ctx context.Context, events []*Event) (wait func()) {
	e.price(ctx, events)
	return e.start(ctx, events).waiter()
}

// Wants reports whether anyone listens for an event of team's with status
// (StatusSuccess or StatusFailure), or an Observer sees every event: a call
// site whose event is built only to be published asks first, and builds
// none for nobody.
func (e *Emitter) Wants(ctx context.Context, team, status string) bool {
	if e == nil {
		return false
	}
	if len(e.observers) > 0 {
		return true
	}
	if e.listeners == nil && e.pricer == nil {
		return false
	}
	if e.pricer != nil {
		return true // spend counts every call
	}
	ok, err := e.listeners.Listening(ctx, team, status)
	return ok || err != nil // an error: let Emit report it
}

// WantsBodies reports whether a callback may log the bodies (Messages,
// Response) of team's events: one listens for either status. Nothing else
// reads them (spend and the Observers read the figures), so a call site
// keeps a copy of its answer for the event only when this says so.
func (e *Emitter) WantsBodies(ctx context.Context, team string) bool {
	if e == nil || e.listeners == nil {
		return false
	}
	ok, err := e.listeners.ListeningEither(ctx, team)
	return ok || err != nil // an error: keep them, let Emit report it
}

// Emit publishes ev. It waits for the publish, unless ctx carries a Pending
// (Deferred, Collect), which then holds it.
func (e *Emitter) Emit(ctx context.Context, ev *Event) {
	e.price(ctx, []*Event{ev})
	if p := ctxvalue.From[Pending](ctx); p != nil {
		p.add(ctx, e, ev)
		return
	}
	if pub := e.start(ctx, []*Event{ev}); pub != nil {
		pub.wait()
	}
}

// EmitAll publishes events in one publish (StartAll) and waits for it.
func (e *Emitter) EmitAll(ctx context.Context, events []*Event) { e.StartAll(ctx, events)() }

func noWait() {}

// waiter is the function that waits for p's publish (none for nil).
func (p *publication) waiter() func() {
	if p == nil {
		return noWait
	}
	return p.wait
}

// start filters events by their listeners and starts the publish of the
// rest, which it returns; nil when there is nothing to publish.
func (e *Emitter) start(ctx context.Context, events []*Event) *publication {
	if e == nil {
		return nil
	}
	for _, o := range e.observers {
		for _, ev := range events {
			o.ObserveEvent(ctx, ev)
		}
	}
	if e.listeners == nil && e.pricer == nil || len(events) == 0 {
		return nil
	}
	// The request may be cancelled (client gone) while we publish: keep
	// going. (Detached only where it is used: an event joining a
	// publication that waits needs no context.)
	var detached context.Context
	wanted := events
	if e.pricer == nil { // spend counts every call; else only the wanted go
		detached = context.WithoutCancel(ctx)
		wanted = e.wanted(detached, events)
	}
	if len(wanted) == 0 {
		return nil
	}
	e.mu.Lock()
	p := e.next
	if p == nil {
		if detached == nil {
			detached = context.WithoutCancel(ctx)
		}
		p = &publication{ctx: detached, done: make(chan struct{}), hurry: make(chan struct{})}
		e.next = p
	}
	p.events = append(p.events, wanted...)
	if !e.running {
		e.running = true
		go e.run()
	}
	e.mu.Unlock()
	return p
}

// wanted is the events someone listens to.
func (e *Emitter) wanted(ctx context.Context, events []*Event) []*Event {
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
	return wanted
}

// Drain waits until every publish started so far has finished, and what a
// Handover took is handled (Handover.Drain), or ctx ends:
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
			break
		}
		select {
		case <-p.done:
		case <-ctx.Done():
			return fmt.Errorf("logevent: drain: %w", context.Cause(ctx))
		}
	}
	if e.handover != nil {
		return e.handover.Drain(ctx)
	}
	return nil
}

// run publishes what waits, then whatever gathered meanwhile, until
// nothing does. With a Handover that lingers, each publish first waits for
// company.
func (e *Emitter) run() {
	for {
		if d := e.lingerFor(); d > 0 {
			e.mu.Lock()
			p := e.next
			e.mu.Unlock()
			if p != nil {
				linger := time.NewTimer(d)
				select {
				case <-linger.C:
				case <-p.hurry:
					linger.Stop()
				}
			}
		}
		e.mu.Lock()
		p := e.next
		e.next, e.current = nil, p
		if p == nil {
			e.running = false
			e.mu.Unlock()
			return
		}
		e.mu.Unlock()
		if err := e.publish(p.ctx, p.events); err != nil {
			slog.ErrorContext(p.ctx, "log events not published", "events", len(p.events), "first_event_id", p.events[0].ID, "error", err)
		}
		close(p.done)
		e.mu.Lock()
		e.current = nil
		e.mu.Unlock()
	}
}

// lingerFor is how long a publish waits for company.
func (e *Emitter) lingerFor() time.Duration {
	if e.handover == nil {
		return 0
	}
	return e.handover.Linger()
}

// group is the log events of one team and outcome.
type group struct {
	team, status string
	events       []*Event
}

func (g group) attributes() map[string]string {
	return map[string]string{AttrTeam: g.team, AttrStatus: g.status}
}

// busEvent is a bus event of g's with body, named name (AttrMessage).
func (g group) busEvent(body []byte, name string) store.Event {
	attrs := g.attributes()
	attrs[AttrMessage] = name
	return store.Event{Attributes: attrs, Body: body}
}

// groupByTeam groups events by team and outcome, in order of appearance.
// The usual publish holds one team's successes: its events are their group
// as they are, not copied.
func groupByTeam(events []*Event) []group {
	if len(events) == 0 {
		return nil
	}
	team, status := events[0].Metadata.UserAPIKeyTeamID, events[0].Status
	if !slices.ContainsFunc(events, func(ev *Event) bool { return ev.Metadata.UserAPIKeyTeamID != team || ev.Status != status }) {
		return []group{{team: team, status: status, events: events}}
	}
	var groups []group
	for _, ev := range events {
		team, status := ev.Metadata.UserAPIKeyTeamID, ev.Status
		i := slices.IndexFunc(groups, func(g group) bool { return g.team == team && g.status == status })
		if i < 0 {
			i = len(groups)
			groups = append(groups, group{team: team, status: status})
		}
		groups[i].events = append(groups[i].events, ev)
	}
	return groups
}

// messageLimit is the most bytes of log events a bus event holds.
func (e *Emitter) messageLimit() int {
	if e.claimCheck <= 0 {
		return DefaultMessageBytes
	}
	return e.claimCheck
}

// publish publishes events: a Handover takes the groups it can in memory;
// the rest are encoded into bus events and published in one call.
func (e *Emitter) publish(ctx context.Context, events []*Event) error {
	groups := groupByTeam(events)
	if e.handover != nil {
		groups = e.handOver(ctx, groups)
	}
	out := e.encode(ctx, groups)
	if len(out) == 0 {
		return nil
	}
	return e.bus.Publish(ctx, out...)
}

// encode encodes groups into bus events: one per group, split where a body
// would pass the bus's size limit or MaxEventsPerMessage events.
func (e *Emitter) encode(ctx context.Context, groups []group) []store.Event {
	var out []store.Event
	for _, g := range groups {
		out = e.appendGroup(ctx, out, g, e.messageLimit())
	}
	return out
}

// appendGroup appends g's bus events to out: bodies of at most limit bytes
// (but for a single event that passes it alone) and MaxEventsPerMessage
// events. Each event is encoded straight into its body, sized from the
// events' raw members up front. Each bus event is named by its first log
// event (AttrMessage).
func (e *Emitter) appendGroup(ctx context.Context, out []store.Event, g group, limit int) []store.Event {
	size := 0
	for _, ev := range g.events {
		size += encodedSizeHint(ev)
	}
	// A body is cut once it passes limit: room for the event that
	// passes it, so that the cut needs no larger copy first.
	room := size
	if size-bodySlack > limit { // limit+bodySlack, which may not overflow
		room = limit + bodySlack
	}
	body := make([]byte, 0, room)
	members := 0
	first := "" // the name of the body being filled
	for _, ev := range g.events {
		mark := len(body)
		var ok bool
		if body, ok = e.appendLine(ctx, body, members, ev); !ok {
			continue
		}
		if members > 0 && (len(body) > limit || members == MaxEventsPerMessage) {
			// Full: this event starts the next body.
			line := body[mark+1:]
			out = append(out, g.busEvent(body[:mark], first))
			body = append(make([]byte, 0, max(room, len(line))), line...)
			members = 0
		}
		if members == 0 {
			first = ev.ID
		}
		members++
	}
	if members > 0 {
		out = append(out, g.busEvent(body, first))
	}
	return out
}

// appendLine appends ev to body as its line after members others. An
// event that cannot be encoded or claim-checked is logged and left out
// (body unchanged, false): it must not cost the others of its group (other
// calls' events) theirs.
func (e *Emitter) appendLine(ctx context.Context, body []byte, members int, ev *Event) ([]byte, bool) {
	mark := len(body)
	if members > 0 {
		body = append(body, '\n')
	}
	body, err := e.appendEncoded(ctx, body, ev)
	if err != nil {
		slog.ErrorContext(ctx, "log event not published", "event_id", ev.ID, "error", err)
		return body[:mark], false
	}
	return body, true
}

// bodySlack is the room a bus body has past its limit: a usual event's.
const bodySlack = 8 << 10

// encodedSizeHint is about the size of ev's JSON: its raw members and what
// an event's other members take.
func encodedSizeHint(ev *Event) int { return 1536 + (len(ev.Messages)+len(ev.Response))*9/8 }

// handOver offers groups to the Handover and returns those it left.
func (e *Emitter) handOver(ctx context.Context, groups []group) []group {
	offered := make([]Group, len(groups))
	for i, g := range groups {
		offered[i] = Group{Team: g.team, Status: g.status, Events: g.events}
	}
	rest := e.handover.Hand(ctx, offered, e.encodeWhole)
	groups = groups[:0]
	for _, g := range rest {
		groups = append(groups, group{team: g.Team, status: g.Status, events: g.Events})
	}
	return groups
}

// encodeWhole encodes g into one bus event named name, without the bus's
// size limit (a Handover's queue takes a message of any size).
func (e *Emitter) encodeWhole(ctx context.Context, g Group, name string) (store.Event, error) {
	size := 0
	for _, ev := range g.Events {
		size += encodedSizeHint(ev)
	}
	body := make([]byte, 0, size)
	for i, ev := range g.Events {
		if i > 0 {
			body = append(body, '\n')
		}
		var err error
		if body, err = e.appendEncoded(ctx, body, ev); err != nil {
			return store.Event{}, err
		}
	}
	return group{team: g.Team, status: g.Status}.busEvent(body, name), nil
}

// appendEncoded appends ev's JSON to b; when that is larger than the
// claim-check threshold, the request and response move to a blob and the
// event appended instead carries its key.
func (e *Emitter) appendEncoded(ctx context.Context, b []byte, ev *Event) ([]byte, error) {
	mark := len(b)
	out, err := appendEvent(b, ev)
	if err != nil {
		return b, fmt.Errorf("encode log event %s: %w", ev.ID, err)
	}
	if e.claimCheck <= 0 || len(out)-mark <= e.claimCheck || e.blobs == nil {
		return out, nil
	}
	payload, err := json.Marshal(ClaimedBodies{Messages: ev.Messages, Response: ev.Response})
	if err != nil {
		return b, fmt.Errorf("encode claim-checked bodies of %s: %w", ev.ID, err)
	}
	key := ClaimCheckPrefix + ev.ID
	if _, err := e.blobs.Put(ctx, key, bytes.NewReader(payload)); err != nil {
		return b, fmt.Errorf("store claim-checked bodies of %s: %w", ev.ID, err)
	}
	small := *ev
	small.Messages, small.Response, small.ClaimCheck = nil, nil, key
	if out, err = appendEvent(b, &small); err != nil {
		return b, fmt.Errorf("encode log event %s: %w", ev.ID, err)
	}
	return out, nil
}

// ClaimedBodies is what a claim-check blob holds.
type ClaimedBodies struct {
	Messages json.RawMessage `json:"messages,omitempty"`
	Response json.RawMessage `json:"response,omitempty"`
}

// Pending holds the log events emitted (Emit) under a context made by
// Deferred or Collect, until Wait.
type Pending struct {
	collect *Emitter // Collect's emitter; nil for Deferred

	mu sync.Mutex
	// pubs are the publishes started under the context (held, not their
	// wait functions: a method value is an allocation). A call starts
	// one, so the first is held inline.
	pub    *publication
	pubs   []*publication
	events []*Event
}

// Deferred returns ctx under which Emit starts each publish at once but
// does not wait for it: p.Wait does. The HTTP edge uses it so that a
// publish overlaps with writing the answer: it writes and flushes the
// answer, then waits (before the function returns: a Lambda freezes after).
func Deferred(ctx context.Context) (_ context.Context, p *Pending) {
	return ctxvalue.With(ctx, Pending{})
}

// Collect returns ctx under which Emit only collects events: p.Wait
// publishes them all in one publish (StartAll) and waits for it. A caller
// that makes many calls at once — the lines of a batch — emits them in a
// few bus events instead of one each.
func (e *Emitter) Collect(ctx context.Context) (_ context.Context, p *Pending) {
	return ctxvalue.With(ctx, Pending{collect: e})
}

func (p *Pending) add(ctx context.Context, e *Emitter, ev *Event) {
	if p.collect != nil {
		p.mu.Lock()
		p.events = append(p.events, ev)
		p.mu.Unlock()
		return
	}
	if pub := e.start(ctx, []*Event{ev}); pub != nil {
		p.mu.Lock()
		switch {
		case p.pub == nil:
			p.pub = pub
		case pub != p.pub && !slices.Contains(p.pubs, pub):
			p.pubs = append(p.pubs, pub)
		}
		p.mu.Unlock()
	}
}

// Waiting reports whether Wait has anything to wait for.
func (p *Pending) Waiting() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pub != nil || len(p.events) > 0
}

// Wait publishes what was collected and waits for every publish started
// under p's context. p can be used again afterwards.
func (p *Pending) Wait() {
	p.mu.Lock()
	pub, pubs, events := p.pub, p.pubs, p.events
	p.pub, p.pubs, p.events = nil, nil, nil
	p.mu.Unlock()
	collected := noWait
	if len(events) > 0 {
		collected = p.collect.StartAll(context.Background(), events)
	}
	if pub != nil {
		pub.wait()
	}
	for _, pub := range pubs {
		pub.wait()
	}
	collected()
}
