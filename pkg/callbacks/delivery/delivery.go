// Package delivery delivers log events to logging callbacks. Handle is the
// handler of the callback-delivery job: it takes one message of the
// delivery queue (SNS → SQS in the cloud, the in-process bus locally),
// whose body holds one or more log events, and sends each event to every
// callback whose type matches its outcome: its team's and the gateway-wide
// ones.
//
// Delivery is at least once, and no event is silently lost:
//
//   - A destination that fails is retried within the handler with
//     exponential backoff (Options.Retries sends per receive).
//   - What still fails leaves the message for redelivery (Handle returns an
//     error), after writing which deliveries of the message succeeded, so
//     the next receive sends only the rest.
//   - On the message's last receive (Options.MaxReceives), or at once for a
//     failure retrying cannot fix (a refused event, refused credentials, a
//     refused address), the event is dead-lettered for that callback: sent
//     to the delivery queue's dead-letter queue (whose depth alarms the
//     operator), naming the callback, so that re-driving it to the delivery
//     queue delivers it to that callback only.
//   - A duplicate can still reach a destination (a request that succeeded
//     but whose answer was lost is sent again). Each destination is sent
//     idempotency keys it honours — Langfuse envelope ids, LangSmith run
//     ids, GCS object names with ifGenerationMatch=0 — all derived from the
//     log event's id, so a duplicate send does not become a duplicate
//     record.
package delivery

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/callbacks"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
	"github.com/sluice-gateway/sluice/pkg/traces"
)

// Defaults of Options.
const (
	// DefaultMaxReceives matches the delivery queue's redrive policy
	// (pkg/store/aws.MaxReceives, local.DefaultMaxReceives): the handler
	// dead-letters what fails on the last receive itself, naming the
	// callback; the queue moves a message there whole only when its
	// handler crashed.
	DefaultMaxReceives    = 5
	DefaultRetries        = 3
	DefaultBackoff        = 200 * time.Millisecond
	DefaultMaxBackoff     = 5 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	// DefaultMaxBatch bounds the events of one destination request before
	// the destination's own byte limits split it further: Langfuse's
	// batch takes 200 events' envelopes (langfuse.MaxBatchEvents).
	DefaultMaxBatch    = 200
	DefaultMaxInflight = 1
	// maxClaimedBytes bounds a claim-checked body read back.
	maxClaimedBytes = 64 << 20
	// maxDeadLetterBytes bounds the log events of one dead letter: they came
	// in one bus message, so they fit in one again, with room for the
	// attributes.
	maxDeadLetterBytes = 200 << 10
	// maxErrorAttr bounds the error a dead letter carries.
	maxErrorAttr = 1 << 10
)

// redacted replaces the request and response for callbacks with
// turn_off_message_logging (LiteLLM writes "redacted-by-litellm").
var redacted = json.RawMessage(`"redacted-by-sluice"`)

// Options tune a Deliverer. Zero fields take the defaults.
type Options struct {
	MaxReceives    int           // receives of a message before its failures are dead-lettered
	Retries        int           // sends of a failing delivery per receive
	Backoff        time.Duration // first wait between sends; doubles, with jitter
	MaxBackoff     time.Duration
	RequestTimeout time.Duration // bounds one destination request
	MaxBatch       int           // events per destination request
	MaxInflight    int           // requests in flight per destination
	Now            func() time.Time
}

// Stats count what a Deliverer did, per (event, callback) delivery.
type Stats struct {
	Delivered    atomic.Int64 // confirmed by the destination
	DeadLettered atomic.Int64
	Resent       atomic.Int64 // sends of a delivery after its first (an upper bound: a redelivery counts its deliveries as resent)
	Skipped      atomic.Int64 // skipped on a redelivery: done before
	Requests     atomic.Int64 // destination requests
	// Undecodable counts messages that held no readable log event (each
	// dead-lettered whole).
	Undecodable atomic.Int64
}

// Deps is what a Deliverer runs on.
type Deps struct {
	Catalog *callbacks.Catalog
	Records store.Records
	Blobs   store.Blobs // claim-checked bodies
	Open    Opener
	// DeadLetters is the delivery queue's dead-letter queue
	// (store.Backend.DeliveryDeadLetters).
	DeadLetters store.Queue
	// Recorder, when set, counts deliveries by destination kind and
	// outcome (pkg/metrics).
	Recorder Recorder
	// Tracer, when on, makes a span of each send to a destination.
	Tracer *traces.Tracer
}

// Recorder counts n deliveries to callbacks named kind (langfuse,
// gcs_bucket, ...) that were delivered, sent again, or dead-lettered.
type Recorder interface {
	Delivery(kind, outcome string, n int)
}

// Delivery outcomes, as a Recorder hears them.
const (
	OutcomeDelivered    = "delivered"
	OutcomeRetried      = "retried"
	OutcomeDeadLettered = "dead_lettered"
)

// Deliverer delivers log events; see the package comment.
type Deliverer struct {
	catalog *callbacks.Catalog
	records store.Records
	blobs   store.Blobs
	dead    store.Queue
	opts    Options
	now     func() time.Time
	dests   *destinations
	stats   Stats
	rec     Recorder
	tracer  *traces.Tracer
	health  health // per team callback: health.go
}

func (d *Deliverer) record(kind, outcome string, n int) {
	if d.rec != nil && n > 0 {
		d.rec.Delivery(kind, outcome, n)
	}
}

// New builds a Deliverer.
func New(d Deps, opts Options) (*Deliverer, error) {
	if d.Catalog == nil || d.Records == nil || d.Blobs == nil || d.Open == nil || d.DeadLetters == nil {
		return nil, errors.New("delivery: catalog, records, blobs, an opener and a dead-letter queue are required")
	}
	def := func(v *int, n int) {
		if *v <= 0 {
			*v = n
		}
	}
	defd := func(v *time.Duration, n time.Duration) {
		if *v <= 0 {
			*v = n
		}
	}
	def(&opts.MaxReceives, DefaultMaxReceives)
	def(&opts.Retries, DefaultRetries)
	def(&opts.MaxBatch, DefaultMaxBatch)
	def(&opts.MaxInflight, DefaultMaxInflight)
	defd(&opts.Backoff, DefaultBackoff)
	defd(&opts.MaxBackoff, DefaultMaxBackoff)
	defd(&opts.RequestTimeout, DefaultRequestTimeout)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	dl := &Deliverer{catalog: d.Catalog, records: d.Records, blobs: d.Blobs, dead: d.DeadLetters, opts: opts, now: opts.Now, rec: d.Recorder, tracer: d.Tracer,
		health: health{records: d.Records}}
	dl.dests = &destinations{
		open: func(ctx context.Context, cb callbacks.Callback) (Destination, error) {
			vars, err := d.Catalog.Open(ctx, cb)
			if err != nil {
				return nil, err
			}
			return d.Open(ctx, cb, vars)
		},
		now:   opts.Now,
		lanes: map[string]destEntry{},
		newLn: func(dest Destination) *lane {
			return &lane{dest: dest, timeout: opts.RequestTimeout, maxBatch: opts.MaxBatch, maxInflight: opts.MaxInflight,
				onSend: func(int) { dl.stats.Requests.Add(1) }}
		},
	}
	return dl, nil
}

// Stats returns the deliverer's counters.
func (d *Deliverer) Stats() *Stats { return &d.stats }

// delivery is one event bound for one callback.
type delivery struct {
	ev *logevent.Event
	*target
	sent *logevent.Event // the event as this callback receives it
	err  error
}

// target is a callback as a message's deliveries use it: what they ask of
// it worked out once per message, not once per event.
type target struct {
	cb     callbacks.Callback
	id     string // cb.ID()
	dest   string // destKey(cb)
	redact bool   // cb.TurnOffMessageLogging()
}

func newTarget(cb callbacks.Callback) *target {
	return &target{cb: cb, id: cb.ID(), dest: destKey(cb), redact: cb.TurnOffMessageLogging()}
}

// key is the unit of progress: "<event id>|<callback id>".
func (w *delivery) key() string { return progressItem(w.ev, w.id) }

func progressItem(ev *logevent.Event, callbackID string) string { return ev.ID + "|" + callbackID }

// Handle delivers the log events of one delivery-queue message. It returns
// nil when every delivery succeeded or was dead-lettered, and an error (the
// message is then redelivered) when some should be tried again later.
func (d *Deliverer) Handle(ctx context.Context, m store.Message) error {
	msg, err := DecodeMessage(m)
	if err != nil {
		// Retrying cannot make a message readable: dead-letter it whole.
		d.stats.Undecodable.Add(1)
		slog.ErrorContext(ctx, "delivery message dead-lettered: no readable log event", "message", m.ID, "error", err)
		return d.sendDead(ctx, m.Body)
	}
	return d.handle(ctx, m, msg)
}

// HandleEvents is Handle for a message whose log events the caller holds
// already, decoded: the local emitter hands what it publishes to the
// delivery job in memory (pkg/handoff), and m is that
// message in the delivery queue, already received.
func (d *Deliverer) HandleEvents(ctx context.Context, m store.Message, events []*logevent.Event) error {
	return d.handle(ctx, m, Message{Events: events})
}

func (d *Deliverer) handle(ctx context.Context, m store.Message, msg Message) error {
	var err error
	done := map[string]bool{}
	if m.Receives > 1 {
		if done, err = d.loadProgress(ctx, m.ID); err != nil {
			return err
		}
	}
	work, err := d.plan(ctx, msg, done, m.Receives)
	if err != nil {
		return err
	}
	if len(work) == 0 {
		return nil
	}
	d.fetchBodies(ctx, work)
	d.run(ctx, work)

	last := m.Receives >= d.opts.MaxReceives
	var retry, dead []*delivery
	var firstErr error
	for _, w := range work {
		switch {
		case w.err == nil: // delivered
		case callbacks.IsPermanent(w.err) || last:
			dead = append(dead, w)
		default:
			retry = append(retry, w)
			firstErr = cmpErr(firstErr, w.err)
		}
	}
	if err := d.bury(ctx, dead, m.Receives); err != nil {
		retry = append(retry, dead...) // not dead-lettered: try again rather than lose them
		firstErr = cmpErr(firstErr, err)
		dead = nil
	}
	d.noteHealth(ctx, m.Receives, msg.Callback != "", work, dead)
	if len(retry) == 0 {
		if m.Receives > 1 {
			_ = d.records.Delete(ctx, progressKey(m.ID), store.Cond{}) // expires anyway
		}
		return nil
	}
	for _, w := range work {
		if w.err == nil {
			done[w.key()] = true
		}
	}
	if len(done) > 0 {
		keys := make([]string, 0, len(done))
		for k := range done {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		if err := d.saveProgress(ctx, m.ID, keys); err != nil {
			slog.WarnContext(ctx, "delivery progress not saved; done deliveries will be sent again", "message", m.ID, "error", err)
		}
	}
	return fmt.Errorf("delivery: %d of %d deliveries of message %s left for redelivery (receive %d of %d): %w",
		len(retry), len(work), m.ID, m.Receives, d.opts.MaxReceives, firstErr)
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// plan lists the deliveries of a message's events: each event to every
// callback it goes to (the gateway's and its team's) that receives its
// outcome — only to msg.Callback for a re-driven dead letter — less those
// done on an earlier receive (on a redelivery, the others count as sent
// again).
func (d *Deliverer) plan(ctx context.Context, msg Message, done map[string]bool, receives int) ([]*delivery, error) {
	var work []*delivery
	teams := map[string][]*target{}
	for _, ev := range msg.Events {
		team := ev.Metadata.UserAPIKeyTeamID
		targets, ok := teams[team]
		if !ok {
			cbs, err := d.catalog.For(ctx, team)
			if err != nil {
				return nil, fmt.Errorf("delivery: %w", err)
			}
			targets = make([]*target, len(cbs))
			for i, cb := range cbs {
				targets[i] = newTarget(cb)
			}
			teams[team] = targets
		}
		matched := false
		for _, t := range targets {
			if msg.Callback != "" && t.id != msg.Callback || !callbacks.Receives(t.cb.Type, ev.Status) {
				continue
			}
			matched = true
			if len(done) > 0 && done[progressItem(ev, t.id)] {
				d.stats.Skipped.Add(1)
				continue
			}
			if receives > 1 {
				d.stats.Resent.Add(1)
				d.record(t.cb.Name, OutcomeRetried, 1)
			}
			work = append(work, &delivery{ev: ev, target: t})
		}
		if !matched && msg.Callback != "" {
			slog.WarnContext(ctx, "re-driven log event not delivered: its callback is gone", "team", team, "callback", msg.Callback, "event_id", ev.ID)
		}
	}
	return work, nil
}

// fetchBodies reads back the claim-checked request and response of the
// events that need them, and prepares each delivery's copy of its event.
// A body that cannot be read now fails its deliveries (retried); one that
// is gone (expired) is delivered without it.
func (d *Deliverer) fetchBodies(ctx context.Context, work []*delivery) {
	bodies := map[string]*logevent.ClaimedBodies{}
	failed := map[string]error{}
	for _, w := range work {
		if !w.redact && w.ev.ClaimCheck == "" {
			w.sent = w.ev // sent as it is: no copy
			continue
		}
		ev := *w.ev
		ev.ClaimCheck = ""
		switch {
		case w.redact:
			ev.Messages, ev.Response = redacted, redacted
		case w.ev.ClaimCheck != "":
			key := w.ev.ClaimCheck
			b, seen := bodies[key]
			if !seen && failed[key] == nil {
				var err error
				if b, err = d.readClaim(ctx, key); err != nil {
					failed[key] = err
				}
				bodies[key] = b
			}
			if err := failed[key]; err != nil {
				w.err = err
				continue
			}
			if b != nil {
				ev.Messages, ev.Response = b.Messages, b.Response
			}
		}
		w.sent = &ev
	}
}

// readClaim reads a claim-check blob; nil, nil when it no longer exists.
func (d *Deliverer) readClaim(ctx context.Context, key string) (*logevent.ClaimedBodies, error) {
	rc, err := d.blobs.Get(ctx, key, 0, -1)
	if errors.Is(err, store.ErrNotFound) {
		slog.WarnContext(ctx, "claim-checked bodies are gone; delivering the log event without them", "blob", key)
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read claim-checked bodies %s: %w", key, err)
	}
	defer rc.Close()
	var b logevent.ClaimedBodies
	if err := json.NewDecoder(io.LimitReader(rc, maxClaimedBytes)).Decode(&b); err != nil {
		return nil, callbacks.Permanent(fmt.Errorf("decode claim-checked bodies %s: %w", key, err))
	}
	return &b, nil
}

// run sends the deliveries, each callback's through its lane, retrying
// what fails for a reason worth retrying, with backoff.
func (d *Deliverer) run(ctx context.Context, work []*delivery) {
	byCallback := map[string][]*delivery{}
	var order []string
	for _, w := range work {
		if w.err != nil {
			continue
		}
		k := w.dest
		if _, ok := byCallback[k]; !ok {
			order = append(order, k)
		}
		byCallback[k] = append(byCallback[k], w)
	}
	var wg sync.WaitGroup
	for _, k := range order {
		group := byCallback[k]
		wg.Go(func() { d.runCallback(ctx, group) })
	}
	wg.Wait()
}

func (d *Deliverer) runCallback(ctx context.Context, group []*delivery) {
	l, err := d.dests.lane(ctx, group[0].cb)
	if err != nil {
		for _, w := range group {
			w.err = err
		}
		return
	}
	pending := group
	for attempt := 1; ; attempt++ {
		events := make([]*logevent.Event, len(pending))
		for i, w := range pending {
			events[i] = w.sent
		}
		sctx, span := d.tracer.StartDelivery(ctx, group[0].cb.Name, events)
		errs := l.send(sctx, events)
		span.End()
		var again []*delivery
		delivered := 0
		for i, w := range pending {
			w.err = errs[i]
			switch {
			case w.err == nil:
				delivered++
			case !callbacks.IsPermanent(w.err):
				again = append(again, w)
			}
		}
		d.stats.Delivered.Add(int64(delivered))
		d.record(group[0].cb.Name, OutcomeDelivered, delivered)
		if len(again) == 0 || attempt >= d.opts.Retries || !d.sleep(ctx, attempt, again) {
			return
		}
		d.stats.Resent.Add(int64(len(again)))
		d.record(group[0].cb.Name, OutcomeRetried, len(again))
		pending = again
	}
}

// sleep waits before send attempt+1: exponential backoff with full jitter,
// at least the longest Retry-After a destination asked for. It reports
// false when ctx ends first.
func (d *Deliverer) sleep(ctx context.Context, attempt int, failed []*delivery) bool {
	ceil := min(d.opts.Backoff<<(attempt-1), d.opts.MaxBackoff)
	wait := ceil/2 + rand.N(ceil/2+1)
	for _, w := range failed {
		var se *callbacks.StatusError
		if errors.As(w.err, &se) && se.RetryAfter > wait {
			wait = min(se.RetryAfter, d.opts.MaxBackoff)
		}
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// bury dead-letters deliveries: per callback and team, their events as
// they travelled (claim-checked bodies stay behind their pointer) in one
// dead letter — a bus event naming the callback — on the dead-letter queue.
func (d *Deliverer) bury(ctx context.Context, dead []*delivery, receives int) error {
	if len(dead) == 0 {
		return nil
	}
	type grave struct {
		team, callback, err string
		bodies              [][]byte
		events              int
	}
	var graves []*grave
	byKey := map[string]*grave{}
	for _, w := range dead {
		team := w.ev.Metadata.UserAPIKeyTeamID
		g := byKey[team+"\x00"+w.id]
		if g == nil {
			g = &grave{team: team, callback: w.id, err: w.err.Error()}
			byKey[team+"\x00"+w.id] = g
			graves = append(graves, g)
		}
		line, err := logevent.EncodeEvents([]*logevent.Event{w.ev})
		if err != nil {
			return fmt.Errorf("encode dead letter: %w", err)
		}
		last := len(g.bodies) - 1
		if last < 0 || len(g.bodies[last])+1+len(line) > maxDeadLetterBytes || g.events == logevent.MaxEventsPerMessage {
			g.bodies = append(g.bodies, line)
			g.events = 1
		} else {
			g.bodies[last] = append(append(g.bodies[last], '\n'), line...)
			g.events++
		}
	}
	var letters [][]byte
	for _, g := range graves {
		errText := g.err
		if len(errText) > maxErrorAttr {
			errText = errText[:maxErrorAttr]
		}
		attrs := map[string]string{logevent.AttrTeam: g.team, AttrCallback: g.callback, AttrError: errText, AttrReceives: strconv.Itoa(receives)}
		for _, b := range g.bodies {
			letters = append(letters, store.EncodeEvent(store.Event{Attributes: attrs, Body: b}))
		}
	}
	if err := d.sendDead(ctx, letters...); err != nil {
		return err
	}
	d.stats.DeadLettered.Add(int64(len(dead)))
	for _, w := range dead {
		d.record(w.cb.Name, OutcomeDeadLettered, 1)
	}
	for _, g := range graves {
		slog.ErrorContext(ctx, "log events dead-lettered: re-drive the delivery dead-letter queue once the destination is fixed",
			"team", g.team, "callback", g.callback, "receives", receives, "error", g.err)
	}
	return nil
}

// sendDead sends bodies to the dead-letter queue, even when the handler's
// time is up.
func (d *Deliverer) sendDead(ctx context.Context, bodies ...[]byte) error {
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := d.dead.Send(sctx, bodies...); err != nil {
		return fmt.Errorf("delivery: send to the dead-letter queue: %w", err)
	}
	return nil
}
