package spend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// Principals resolves a stored key to its principal (auth.Service): the
// counter needs its and its team's creation and budget duration to find
// the budget period a call counts in.
type Principals interface {
	PrincipalOf(ctx context.Context, token string) (auth.Principal, error)
}

// CounterOptions tune a Counter. Zero fields take the defaults.
type CounterOptions struct {
	// Linger is how long a flush waits for company: the counters of a
	// key are written at most once a Linger per process.
	Linger time.Duration
	// DedupeTTL is how long a counted event's id is remembered: longer
	// than any queue keeps a message (SQS: 14 days at most).
	DedupeTTL time.Duration
	Now       func() time.Time
}

// Default counter options.
const (
	DefaultLinger    = 200 * time.Millisecond
	DefaultDedupeTTL = 15 * 24 * time.Hour
)

// Counter counts the spend of log events exactly once: per key, team and
// model per UTC day (the reports), and per key and team per budget period
// (the budgets). Count is a group commit: the events handed to it while a
// flush lingers go in one transaction (or a few: a transaction holds at
// most store.MaxTransactWrites writes) — each event's dedupe record (put
// only if absent) and the sums added to the counters they touch. An event
// counted before (a redelivery, a retry after a crash between the count
// and the queue's ack) fails its dedupe condition and is left out.
type Counter struct {
	records    store.Records
	principals Principals
	opts       CounterOptions

	mu      sync.Mutex
	pending *flush

	// Writes counts the item writes of the flushes (dedupe records and
	// counters), for the bench.
	Writes, CounterWrites, Flushes int64
}

// flush is one group commit: the callers whose events it counts, each
// told the outcome of the transactions that held its own events — one
// slow or failed transaction fails only the messages it carried, not
// every message of the flush (which would all be redelivered and counted
// again, a backlog that feeds itself).
type flush struct {
	callers []*caller
	done    chan struct{}
}

type caller struct {
	events []*logevent.Event
	err    error
}

// NewCounter builds a counter over the records.
func NewCounter(records store.Records, principals Principals, opts CounterOptions) *Counter {
	if opts.Linger <= 0 {
		opts.Linger = DefaultLinger
	}
	if opts.DedupeTTL <= 0 {
		opts.DedupeTTL = DefaultDedupeTTL
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Counter{records: records, principals: principals, opts: opts}
}

// Count counts events and returns once they are stored (or counted
// before). An error means they may not be: the caller leaves its message
// for redelivery, which counts what is missing and nothing twice.
func (c *Counter) Count(ctx context.Context, events []*logevent.Event) error {
	if len(events) == 0 {
		return nil
	}
	me := &caller{events: events}
	c.mu.Lock()
	f := c.pending
	lead := f == nil
	if lead {
		f = &flush{done: make(chan struct{})}
		c.pending = f
	}
	f.callers = append(f.callers, me)
	c.mu.Unlock()
	if lead {
		t := time.NewTimer(c.opts.Linger)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		c.mu.Lock()
		c.pending = nil
		c.mu.Unlock()
		// The flush carries others' events too: it finishes whatever
		// the leader's caller does.
		c.flush(context.WithoutCancel(ctx), f.callers)
		close(f.done)
	}
	select {
	case <-f.done:
		return me.err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// stepTimeout bounds one transaction of a flush, and the reads that find
// which of its events were counted before (each step its own bound, so a
// large flush is not cut short as a whole).
const stepTimeout = 30 * time.Second

// item is one event's writes: its dedupe record and its counter deltas.
type item struct {
	id     string
	dedupe *store.Write
	adds   map[store.Key]map[string]int64
	// owners are the callers that handed this event in (more than one
	// when a redelivered message meets its first delivery).
	owners []*caller
}

func dedupeKey(id string) store.Key { return store.Key{PK: "SPEND#EVENT#" + id, SK: "EVENT"} }

// dayKey is the record of one group's spend on one UTC day: the reports
// read a day's partition. Keys and models are filed under their team, so
// a team's report reads its own rows only.
func dayKey(day, group string) store.Key { return store.Key{PK: "SPEND#DAY#" + day, SK: group} }

// flush counts the callers' events, setting each caller's err to the
// first failure among the transactions that held its events.
func (c *Counter) flush(ctx context.Context, callers []*caller) {
	items := make([]item, 0, len(callers))
	byID := map[string]int{}
	for _, cl := range callers {
		for _, ev := range cl.events {
			if ev.BudgetAlert != nil {
				continue // no call: nothing spent, no request
			}
			if at, ok := byID[ev.ID]; ok && ev.ID != "" {
				items[at].owners = appendOwner(items[at].owners, cl) // the same event twice in one flush
				continue
			}
			it, err := c.itemOf(ctx, ev)
			if err != nil {
				cl.err = cmpFirst(cl.err, err)
				continue
			}
			it.owners = []*caller{cl}
			if ev.ID != "" {
				byID[ev.ID] = len(items)
			}
			items = append(items, it)
		}
	}
	for len(items) > 0 {
		n, writes := chunk(items)
		tctx, cancel := context.WithTimeout(ctx, stepTimeout)
		err := c.records.Transact(tctx, writes)
		if errors.Is(err, store.ErrConditionFailed) {
			// Some events were counted before: find them, drop them, and
			// write the rest.
			cancel()
			// Its own bound: one read per event of the transaction.
			uctx, ucancel := context.WithTimeout(ctx, stepTimeout)
			kept, ferr := c.uncounted(uctx, items[:n])
			ucancel()
			if ferr == nil {
				items = append(kept, items[n:]...)
				continue
			}
			err = ferr
		}
		cancel()
		if err != nil {
			err = fmt.Errorf("spend: count %d events: %w", n, err)
			for _, it := range items[:n] {
				for _, cl := range it.owners {
					cl.err = cmpFirst(cl.err, err)
				}
			}
			items = items[n:]
			continue
		}
		c.mu.Lock()
		c.Flushes++
		c.Writes += int64(len(writes))
		for _, w := range writes {
			if w.Kind == store.WriteAdd {
				c.CounterWrites++
			}
		}
		c.mu.Unlock()
		items = items[n:]
	}
}

func appendOwner(owners []*caller, cl *caller) []*caller {
	for _, o := range owners {
		if o == cl {
			return owners
		}
	}
	return append(owners, cl)
}

func cmpFirst(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// chunk takes the first items whose writes fit one transaction, merging
// their counter deltas, and returns how many it took and the writes.
func chunk(items []item) (int, []store.Write) {
	adds := map[store.Key]map[string]int64{}
	var order []store.Key
	dedupes := 0
	n := 0
	for _, it := range items {
		newKeys := 0
		for k := range it.adds {
			if _, ok := adds[k]; !ok {
				newKeys++
			}
		}
		d := 0
		if it.dedupe != nil {
			d = 1
		}
		if n > 0 && dedupes+d+len(adds)+newKeys > store.MaxTransactWrites {
			break
		}
		dedupes += d
		for k, deltas := range it.adds {
			sum, ok := adds[k]
			if !ok {
				sum = map[string]int64{}
				adds[k] = sum
				order = append(order, k)
			}
			for name, v := range deltas {
				sum[name] += v
			}
		}
		n++
	}
	writes := make([]store.Write, 0, dedupes+len(order))
	for _, it := range items[:n] {
		if it.dedupe != nil {
			writes = append(writes, *it.dedupe)
		}
	}
	for _, k := range order {
		writes = append(writes, store.Write{Kind: store.WriteAdd, Record: store.Record{Key: k, Counters: adds[k]}})
	}
	return n, writes
}

// uncounted returns the items whose dedupe record is absent.
func (c *Counter) uncounted(ctx context.Context, items []item) ([]item, error) {
	var kept []item
	for _, it := range items {
		if it.dedupe == nil {
			kept = append(kept, it)
			continue
		}
		_, err := c.records.Get(ctx, it.dedupe.Record.Key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			kept = append(kept, it)
		case err != nil:
			return nil, fmt.Errorf("spend: read dedupe of event %s: %w", it.id, err)
		}
	}
	if len(kept) == len(items) {
		return nil, fmt.Errorf("spend: a count failed its condition but no event of it was counted before")
	}
	return kept, nil
}

// itemOf is the writes that count ev.
func (c *Counter) itemOf(ctx context.Context, ev *logevent.Event) (item, error) {
	it := item{id: ev.ID, adds: map[store.Key]map[string]int64{}}
	if ev.ID != "" {
		it.dedupe = &store.Write{Kind: store.WritePut, Cond: store.Cond{Absent: true}, Record: store.Record{
			Key: dedupeKey(ev.ID), ExpiresAt: c.opts.Now().Add(c.opts.DedupeTTL)}}
	}
	deltas := map[string]int64{
		counterCost: nanos(ev.ResponseCost), counterInput: ev.PromptTokens,
		counterOutput: ev.CompletionTokens, counterRequests: 1,
	}
	at := eventTime(ev)
	day := at.UTC().Format(time.DateOnly)
	md := ev.Metadata
	team := md.UserAPIKeyTeamID
	it.adds[dayKey(day, "team#"+team)] = deltas
	if md.UserAPIKeyHash != "" {
		it.adds[dayKey(day, "key#"+team+"#"+md.UserAPIKeyHash)] = deltas
	}
	if model := ev.ModelGroup; model != "" || ev.Model != "" {
		if model == "" {
			model = ev.Model
		}
		it.adds[dayKey(day, "model#"+team+"#"+model)] = deltas
	}
	if md.UserAPIKeyHash == "" || ev.ResponseCost == 0 {
		return it, nil
	}
	// The budget periods: the key's and its team's, as they are now.
	p, err := c.principals.PrincipalOf(ctx, md.UserAPIKeyHash)
	var gone *api.Error
	switch {
	case errors.As(err, &gone) && gone.Status == 401:
		// Deleted or expired since: no budget left to count against.
		slog.DebugContext(ctx, "spend: a call's key is gone; its budget period is not counted", "event_id", ev.ID, "error", err)
		return it, nil
	case err != nil:
		return it, fmt.Errorf("spend: resolve the key of event %s: %w", ev.ID, err)
	}
	cost := map[string]int64{counterCost: nanos(ev.ResponseCost)}
	if k := p.Key; k != nil {
		period, _ := Period(k.CreatedAt, k.BudgetDuration, at)
		it.adds[periodKey("key:"+k.Token, period)] = cost
	}
	if t := p.Team; t != nil {
		period, _ := Period(t.CreatedAt, t.BudgetDuration, at)
		it.adds[periodKey("team:"+t.TeamID, period)] = cost
	}
	return it, nil
}

// eventTime is when a call started.
func eventTime(ev *logevent.Event) time.Time {
	if ev.StartTime <= 0 {
		return time.Now()
	}
	sec := int64(ev.StartTime)
	return time.Unix(sec, int64((ev.StartTime-float64(sec))*1e9))
}
