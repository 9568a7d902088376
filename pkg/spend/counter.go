package spend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
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
// most store.MaxTransactWrites writes) — the dedupe records and the sums
// added to the counters they touch. A message counted before (a
// redelivery, a retry after a crash between the count and the queue's ack)
// fails its dedupe record's condition and is left out.
//
// The dedupe record is one a bus message (CountMessage) where the
// emitter named the message, else one an event (Count). A named message
// is counted exactly once when:
//   - every copy of it carries its name and the same events in the same
//     order: the emitter names a bus event once, as it builds it, and
//     the bus's retries, SNS's duplicates and the queue's redeliveries
//     copy its bytes (logevent.AttrMessage); events handed over in memory
//     are named by the handoff's message ID, and the queue copy it may
//     write holds all of them under that ID and name, or is not written;
//   - none of its events is in another named message, nor counted on its
//     own: a call's event is published or handed over once (a failed
//     publish is logged, not regrouped), and a native batch's
//     lines, which a retried copy of the provider's output emits again
//     under the same IDs, are counted one by one (a message holding one is
//     counted by event);
//   - its count is atomic or resumable: the record holds how many of its
//     events are counted. It is written in the transaction that adds them:
//     all of them when they fit one transaction; else in parts, each
//     conditional on the count the previous one left, so a redelivery
//     resumes after the last part written and counts nothing twice;
//   - a dead letter (the delivery worker's, for one callback) is not
//     counted again: its events were counted before the delivery that gave
//     up on them (the caller skips it).
type Counter struct {
	records    store.Records
	principals Principals
	opts       CounterOptions

	mu      sync.Mutex
	pending *flush

	// Writes counts the item writes of the flushes (dedupe records and
	// counters), for the bench; Records the dedupe records among them.
	Writes, CounterWrites, Records, Flushes int64
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
	name   string // the message's name; "" counts each event on its own
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

// Count counts events, each under its own dedupe record, and returns once
// they are stored (or counted before). An error means they may not be: the
// caller leaves its message for redelivery, which counts what is missing
// and nothing twice.
func (c *Counter) Count(ctx context.Context, events []*logevent.Event) error {
	return c.count(ctx, &caller{events: events})
}

// CountMessage counts the events of the bus message named name
// (logevent.AttrMessage) under one dedupe record for the message; an
// unnamed message, or one holding a native batch's line, is counted event
// by event (Count).
func (c *Counter) CountMessage(ctx context.Context, name string, events []*logevent.Event) error {
	if slices.ContainsFunc(events, func(ev *logevent.Event) bool { return ev.NativeBatch }) {
		name = ""
	}
	return c.count(ctx, &caller{name: name, events: events})
}

func (c *Counter) count(ctx context.Context, me *caller) error {
	if len(me.events) == 0 {
		return nil
	}
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

// adds is what one event adds to the counter records of its flush: its
// cost, tokens and one request to its report rows (rows[:reports]), its
// cost alone to its budget periods (rows[reports:n]); nothing when n is 0.
// An event touches at most maxAdds records, and the flush sums them by row
// once (pack). Held by value, without pointers: an event's deltas cost no
// allocation of their own, the collector does not scan them, and a flush
// reads a few bytes an event, not one delta a record.
type adds struct {
	cost, input, output int64
	rows                [maxAdds]int32 // the records' numbers in the flush (rowKeys): pack sums by them, hashing no key
	reports, n          uint8
}

func (a *adds) empty() bool { return a.n == 0 }

// add adds k's record, named in rows, to a's records; a report row must
// come before any budget period.
func (a *adds) add(rows *rowKeys, k rowKey, report bool) {
	a.rows[a.n] = rows.row(int(a.n), k)
	a.n++
	if report {
		a.reports++
	}
}

// delta is the counters added to a record: a report row takes all four,
// a budget period the cost alone (costOnly).
type delta struct {
	cost, input, output, requests int64
	costOnly                      bool
}

// counters is d as the record's counters.
func (d delta) counters() map[string]int64 {
	if d.costOnly {
		return map[string]int64{counterCost: d.cost}
	}
	return map[string]int64{counterCost: d.cost, counterInput: d.input, counterOutput: d.output, counterRequests: d.requests}
}

// plus adds a's i-th record's part to d.
func (d *delta) plus(a *adds, i int) {
	d.cost += a.cost
	if i < int(a.reports) {
		d.input += a.input
		d.output += a.output
		d.requests++
	}
}

// unit is what one dedupe record guards: one event, or a named message's
// events.
type unit struct {
	key     store.Key // its dedupe record; zero: none (an event without an ID)
	message bool
	events  []adds // a message's in its order; an event's one
	// A message's progress: from events were counted before (its
	// record's count, of the record's version; 0 and 0: no record), and
	// the transaction being written counts them up to to.
	from, to int
	version  int64
	// owners are the callers that handed it in (more than one when a
	// redelivered message meets its first delivery).
	owners []*caller
}

// countedEvents is the counter of a message's dedupe record: how many of
// its events are counted.
const countedEvents = "events"

func dedupeKey(id string) store.Key { return store.Key{PK: "SPEND#EVENT#" + id, SK: "EVENT"} }

func messageKey(name string) store.Key { return store.Key{PK: "SPEND#MESSAGE#" + name, SK: "MESSAGE"} }

// dayKey is the record of one group's spend on one UTC day: the reports
// read a day's partition. Keys and models are filed under their team, so
// a team's report reads its own rows only.
func dayKey(day, group string) store.Key { return store.Key{PK: "SPEND#DAY#" + day, SK: group} }

// flush counts the callers' events, setting each caller's err to the
// first failure among the transactions that held its events.
func (c *Counter) flush(ctx context.Context, callers []*caller) {
	units, rows := c.units(ctx, callers)
	scratch := newPackScratch(rows)
	for len(units) > 0 {
		n, writes := c.pack(units, scratch)
		tctx, cancel := context.WithTimeout(ctx, stepTimeout)
		err := c.records.Transact(tctx, writes)
		cancel()
		if errors.Is(err, store.ErrConditionFailed) {
			// Some were counted before: find how far, and write the rest.
			// Its own bound: one read per unit of the transaction.
			uctx, ucancel := context.WithTimeout(ctx, stepTimeout)
			kept, ferr := c.uncounted(uctx, units[:n])
			ucancel()
			if ferr == nil {
				units = append(kept, units[n:]...)
				continue
			}
			err = ferr
		}
		if err != nil {
			err = fmt.Errorf("spend: count %d messages or events: %w", n, err)
			for _, u := range units[:n] {
				for _, cl := range u.owners {
					cl.err = cmpFirst(cl.err, err)
				}
			}
			units = units[n:]
			continue
		}
		c.mu.Lock()
		c.Flushes++
		c.Writes += int64(len(writes))
		for _, w := range writes {
			if w.Kind == store.WriteAdd {
				c.CounterWrites++
			} else {
				c.Records++
			}
		}
		c.mu.Unlock()
		// A message written in part goes on from where it stopped.
		var rest []*unit
		for _, u := range units[:n] {
			if u.message && u.to < len(u.events) {
				u.from, u.version = u.to, u.version+1
				rest = append(rest, u)
			}
		}
		units = append(rest, units[n:]...)
	}
}

// units turns the callers' events into dedupe units: a named message one
// (handed in twice: one unit, both its owners), else one an event, and
// returns them with the counter records they add to. A message one of
// whose events cannot be priced into counters fails whole: it is not
// counted in part.
func (c *Counter) units(ctx context.Context, callers []*caller) ([]*unit, *rowKeys) {
	var units []*unit
	byKey := map[store.Key]*unit{}
	rows := &rowKeys{}
	for _, cl := range callers {
		if cl.name != "" {
			key := messageKey(cl.name)
			if u := byKey[key]; u != nil {
				u.owners = appendOwner(u.owners, cl)
				continue
			}
			u := &unit{key: key, message: true, events: make([]adds, len(cl.events)), owners: []*caller{cl}}
			for i, ev := range cl.events {
				a, err := c.addsOf(ctx, rows, ev)
				if err != nil {
					cl.err, u = err, nil
					break
				}
				u.events[i] = a
			}
			if u != nil && slices.ContainsFunc(u.events, func(a adds) bool { return !a.empty() }) {
				byKey[key] = u
				units = append(units, u)
			}
			continue
		}
		for _, ev := range cl.events {
			var key store.Key
			if ev.ID != "" {
				key = dedupeKey(ev.ID)
				if u := byKey[key]; u != nil { // the same event twice in one flush
					u.owners = appendOwner(u.owners, cl)
					continue
				}
			}
			a, err := c.addsOf(ctx, rows, ev)
			if err != nil {
				cl.err = cmpFirst(cl.err, err)
				continue
			}
			if a.empty() {
				continue // nothing to count, nothing to remember
			}
			u := &unit{key: key, events: []adds{a}, owners: []*caller{cl}}
			if ev.ID != "" {
				byKey[key] = u
			}
			units = append(units, u)
		}
	}
	return units, rows
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

// packScratch is what pack keeps by row (an add's number in its flush),
// allocated once a flush: indexing it costs less than hashing each add's
// key into maps, as pack did once per add and step.
type packScratch struct {
	rows *rowKeys
	in   []int32 // 1 + the row's index in the transaction's sums; 0: not in it
	seen []int   // mark: the row is new to the transaction in the unit being sized
	mark int
}

func newPackScratch(rows *rowKeys) *packScratch {
	n := len(rows.recs)
	return &packScratch{rows: rows, in: make([]int32, n), seen: make([]int, n)}
}

// rowSum is one counter record's sum in a transaction.
type rowSum struct {
	row int32
	delta
}

// pack takes the first units whose writes fit one transaction, merging
// their counter deltas, and returns how many it took and the writes. A
// message that does not fit a transaction of its own is cut: the
// transaction takes its events up to u.to.
func (c *Counter) pack(units []*unit, s *packScratch) (int, []store.Write) {
	var sums []rowSum
	records, n := 0, 0
	for _, u := range units {
		rec := 0
		if u.key != (store.Key{}) {
			rec = 1
		}
		s.mark++
		fresh := 0 // rows u adds to the transaction's
		to := u.from
		for ; to < len(u.events); to++ {
			// Marked before it is known to fit: an event that does not
			// ends the unit's sizing, and no mark of it is read again.
			ev := &u.events[to]
			extra := 0
			for _, row := range ev.rows[:ev.n] {
				if s.in[row] == 0 && s.seen[row] != s.mark {
					s.seen[row] = s.mark
					extra++
				}
			}
			if records+rec+len(sums)+fresh+extra > store.MaxTransactWrites {
				break
			}
			fresh += extra
		}
		if to < len(u.events) && n > 0 {
			break // the next transaction, alone if it must be cut
		}
		u.to = to
		records += rec
		for e := range u.events[u.from:to] {
			ev := &u.events[u.from+e]
			for k, row := range ev.rows[:ev.n] {
				i := s.in[row]
				if i == 0 {
					sums = append(sums, rowSum{row: row, delta: delta{costOnly: k >= int(ev.reports)}})
					i = int32(len(sums))
					s.in[row] = i
				}
				sums[i-1].plus(ev, k)
			}
		}
		n++
		if to < len(u.events) {
			break
		}
	}
	expires := c.opts.Now().Add(c.opts.DedupeTTL)
	writes := make([]store.Write, 0, records+len(sums))
	for _, u := range units[:n] {
		switch {
		case u.key == store.Key{}:
		case u.message:
			cond := store.Cond{Absent: true}
			if u.version > 0 {
				cond = store.Cond{Version: u.version}
			}
			writes = append(writes, store.Write{Kind: store.WritePut, Cond: cond, Record: store.Record{
				Key: u.key, Counters: map[string]int64{countedEvents: int64(u.to)}, ExpiresAt: expires}})
		default:
			writes = append(writes, store.Write{Kind: store.WritePut, Cond: store.Cond{Absent: true}, Record: store.Record{
				Key: u.key, ExpiresAt: expires}})
		}
	}
	for _, sum := range sums {
		writes = append(writes, store.Write{Kind: store.WriteAdd, Record: store.Record{Key: s.rows.recs[sum.row], Counters: sum.counters()}})
		s.in[sum.row] = 0 // the next transaction starts empty
	}
	return n, writes
}

// uncounted reads the dedupe records of units whose transaction failed its
// condition: an event counted before is dropped, a message goes on from
// the count its record holds (dropped when that is all of it).
func (c *Counter) uncounted(ctx context.Context, units []*unit) ([]*unit, error) {
	var kept []*unit
	moved := false
	for _, u := range units {
		if u.key == (store.Key{}) {
			kept = append(kept, u)
			continue
		}
		rec, err := c.records.Get(ctx, u.key)
		switch {
		case errors.Is(err, store.ErrNotFound):
			if u.message && u.version != 0 {
				u.from, u.version, moved = 0, 0, true // expired meanwhile: as new
			}
			kept = append(kept, u)
			continue
		case err != nil:
			return nil, fmt.Errorf("spend: read dedupe record %s: %w", u.key.PK, err)
		}
		if !u.message {
			moved = true
			continue // counted before
		}
		counted := int(rec.Counters[countedEvents])
		if counted >= len(u.events) {
			moved = true
			continue
		}
		if counted != u.from || rec.Version != u.version {
			u.from, u.version, moved = counted, rec.Version, true
		}
		kept = append(kept, u)
	}
	if !moved {
		return nil, fmt.Errorf("spend: a count failed its condition but nothing of it was counted before")
	}
	return kept, nil
}

// maxAdds is the most records one event adds to (addsOf): its team's,
// key's and model's rows of the day, its key's and team's budget periods.
const maxAdds = 5

// addsOf is what ev adds to the counter records rows names: nothing for a
// budget alert (no call: nothing spent, no request).
func (c *Counter) addsOf(ctx context.Context, rows *rowKeys, ev *logevent.Event) (adds, error) {
	var a adds
	if ev.BudgetAlert != nil {
		return a, nil
	}
	a.cost, a.input, a.output = nanos(ev.ResponseCost), ev.PromptTokens, ev.CompletionTokens
	at := eventTime(ev)
	day := rows.day(at)
	md := ev.Metadata
	team := md.UserAPIKeyTeamID
	a.add(rows, rowKey{kind: "team#", day: day, team: team}, true)
	if md.UserAPIKeyHash != "" {
		a.add(rows, rowKey{kind: "key#", day: day, team: team, sub: md.UserAPIKeyHash}, true)
	}
	if model := ev.ModelGroup; model != "" || ev.Model != "" {
		if model == "" {
			model = ev.Model
		}
		a.add(rows, rowKey{kind: "model#", day: day, team: team, sub: model}, true)
	}
	if md.UserAPIKeyHash == "" || ev.ResponseCost == 0 {
		return a, nil
	}
	// The budget periods: the key's and its team's, as they are now.
	p, err := rows.principal(ctx, c.principals, md.UserAPIKeyHash)
	if err != nil {
		if gone := (*api.Error)(nil); errors.As(err, &gone) && gone.Status == 401 {
			// Deleted or expired since: no budget left to count against.
			slog.DebugContext(ctx, "spend: a call's key is gone; its budget period is not counted", "event_id", ev.ID, "error", err)
			return a, nil
		}
		return a, fmt.Errorf("spend: resolve the key of event %s: %w", ev.ID, err)
	}
	if k := p.Key; k != nil {
		a.add(rows, rowKey{kind: "key:", day: rows.period(k.CreatedAt, k.BudgetDuration, at), team: k.Token}, false)
	}
	if t := p.Team; t != nil {
		a.add(rows, rowKey{kind: "team:", day: rows.period(t.CreatedAt, t.BudgetDuration, at), team: t.TeamID}, false)
	}
	return a, nil
}

// rowKeys names the counter records of one flush: the events of a flush
// mostly fall on one day and a few keys, teams and models, so each
// record's key (and each day's name) is built once a flush, not once an
// event. Each record also gets a number, its row, from 0 up.
type rowKeys struct {
	lastDay  int64 // unix day of lastName; valid when lastName is set
	lastName string
	periods  map[int64]string    // budget periods' names (Period) by number
	keys     map[rowKey]int32    // the record's row by its parts
	rows     map[store.Key]int32 // the rows by record
	recs     []store.Key         // the records by row
	// recent are the records last named, by their place among an event's
	// (adds.rows): a flush's events come in runs of one key, team, model
	// and day, whose records need no lookup.
	recent [maxAdds]struct {
		k   rowKey
		row int32
	}
	// principals are the keys' principals (by hash), each resolved once
	// a flush: a flush is one moment, and its events come from few keys.
	principals map[string]auth.Principal
}

// principal is the principal of the key whose hash is token, as the
// flush's first event of that key found it.
func (r *rowKeys) principal(ctx context.Context, principals Principals, token string) (auth.Principal, error) {
	if p, ok := r.principals[token]; ok {
		return p, nil
	}
	p, err := principals.PrincipalOf(ctx, token)
	if err != nil {
		return p, err
	}
	if r.principals == nil {
		r.principals = map[string]auth.Principal{}
	}
	r.principals[token] = p
	return p, nil
}

// rowKey is a counter record by its parts: a report row (kind "team#",
// "key#" or "model#"; day; team; the key's hash or the model) or a budget
// period (kind "key:" or "team:"; the period in day; the key or team in
// team).
type rowKey struct{ kind, day, team, sub string }

// day is at's UTC day as the reports name it.
func (r *rowKeys) day(at time.Time) string {
	d := at.Unix()
	if d < 0 {
		d -= 86399 // floor: days before 1970
	}
	d /= 86400
	if r.lastName == "" || d != r.lastDay {
		r.lastDay, r.lastName = d, at.UTC().Format(time.DateOnly)
	}
	return r.lastName
}

// period is the name of the budget period of t (Period), each named once a
// flush: Period allocates its end and, past 99, its name.
func (r *rowKeys) period(created time.Time, duration string, t time.Time) string {
	k, d := periodIndex(created, duration, t)
	if d == 0 {
		return "all"
	}
	name, ok := r.periods[k]
	if !ok {
		if r.periods == nil {
			r.periods = map[int64]string{}
		}
		name = strconv.FormatInt(k, 10)
		r.periods[k] = name
	}
	return name
}

// row is the number of k's record, the i-th of its event's.
func (r *rowKeys) row(i int, k rowKey) int32 {
	recent := &r.recent[i]
	if recent.k == k {
		return recent.row
	}
	row, ok := r.keys[k]
	if !ok {
		row = r.name(k)
	}
	recent.k, recent.row = k, row
	return row
}

// name numbers k's record, new to the flush.
func (r *rowKeys) name(k rowKey) int32 {
	var key store.Key
	switch k.kind {
	case "key:", "team:":
		key = periodKey(k.kind+k.team, k.day)
	case "team#":
		key = dayKey(k.day, k.kind+k.team)
	default:
		key = dayKey(k.day, k.kind+k.team+"#"+k.sub)
	}
	if r.keys == nil {
		r.keys, r.rows = map[rowKey]int32{}, map[store.Key]int32{}
	}
	// Two parts naming one record (a team id holding the separator, say)
	// share its row, as they share its write.
	row, ok := r.rows[key]
	if !ok {
		row = int32(len(r.recs))
		r.rows[key] = row
		r.recs = append(r.recs, key)
	}
	r.keys[k] = row
	return row
}

// eventTime is when a call started.
func eventTime(ev *logevent.Event) time.Time {
	if ev.StartTime <= 0 {
		return time.Now()
	}
	sec := int64(ev.StartTime)
	return time.Unix(sec, int64((ev.StartTime-float64(sec))*1e9))
}
