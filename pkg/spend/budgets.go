package spend

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/ctxvalue"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// CodeBudgetExceeded is the error type and code of a call refused by a
// budget (LiteLLM's).
const CodeBudgetExceeded = "budget_exceeded"

// Period is the budget period of a key or team created at created, whose
// budget resets every duration (a LiteLLM duration; "" never resets), at
// time t: its id (the counter it is kept under) and when it ends (nil:
// never). Periods are counted from creation, so every process agrees.
func Period(created time.Time, duration string, t time.Time) (id string, resetAt *time.Time) {
	k, d := periodIndex(created, duration, t)
	if d == 0 {
		return "all", nil
	}
	reset := created.Add(time.Duration(k+1) * d).UTC()
	return strconv.FormatInt(k, 10), &reset
}

// periodIndex is the number of the budget period of t (Period) and the
// period's length; 0 for a budget that never resets. It allocates
// nothing: an admission names the period (FormatInt) only when it changes.
func periodIndex(created time.Time, duration string, t time.Time) (k int64, d time.Duration) {
	if duration == "" {
		return 0, 0
	}
	d, err := auth.ParseDuration(duration)
	if err != nil {
		return 0, 0 // refused when set; an old record with a bad one never resets
	}
	if t.After(created) {
		k = int64(t.Sub(created) / d)
	}
	return k, d
}

// periodKey is the record counting a scope's spend in one budget period.
func periodKey(scope, period string) store.Key {
	return store.Key{PK: "SPEND#" + scope, SK: "PERIOD#" + period}
}

// The counters of spend records: cost in nano-USD (integers add exactly,
// in both stores), tokens, requests.
const (
	counterCost     = "nusd"
	counterInput    = "input_tokens"
	counterOutput   = "output_tokens"
	counterRequests = "requests"
)

func nanos(usd float64) int64 { return int64(usd*1e9 + 0.5) }
func usd(nanos int64) float64 { return float64(nanos) / 1e9 }

// BudgetOptions tune Budgets. Zero fields take the defaults.
type BudgetOptions struct {
	// Refresh is how old a stored spend may be before an admission reads
	// it again.
	Refresh time.Duration
	// Settle is how long a finished call's cost is still added to the
	// stored spend: about the time its count takes to reach the store
	// (the delivery job's flush). Counted twice meanwhile, never missed.
	Settle time.Duration
	Now    func() time.Time
	// Alerts publishes a soft budget crossing's log event (nil: the
	// warning line only).
	Alerts Alerts
}

// Alerts publishes log events (logevent.Emitter).
type Alerts interface {
	Emit(ctx context.Context, ev *logevent.Event)
}

// Default budget options.
const (
	DefaultRefresh = time.Second
	DefaultSettle  = 5 * time.Second
)

// Budgets admits calls against their key's and team's budgets: the spend
// stored for the current period, plus what running batches reserve
// (reserve.go), plus the calls of this process still in flight at their
// estimated cost, plus those that finished too recently to be stored, must
// be below max_budget. The estimate is the scope's mean
// cost per call in this process (else the process's); so N concurrent
// calls on a budget admitting K admit about K, not N.
type Budgets struct {
	records store.Records
	opts    BudgetOptions

	mu     sync.Mutex
	scopes map[string]*scope
	mean   mean // every call of the process
}

// NewBudgets builds the budget admission over the spend records.
func NewBudgets(records store.Records, opts BudgetOptions) *Budgets {
	if opts.Refresh <= 0 {
		opts.Refresh = DefaultRefresh
	}
	if opts.Settle <= 0 {
		opts.Settle = DefaultSettle
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Budgets{records: records, opts: opts, scopes: map[string]*scope{}}
}

// scope is one key's or team's budget state in this process.
type scope struct {
	name       string // "key:<token>", "team:<id>"
	period     string
	periodK    int64         // period's index (periodIndex)
	periodD    time.Duration // and length: period is named again only when they change
	stored     float64       // USD stored for period, as read at readAt
	reserved   float64       // USD the scope's running batches reserve, as read at readAt
	readAt     time.Time
	inflight   float64 // estimates of the admitted calls not finished
	recent     []ended // finished calls, until Settle has passed, oldest first
	recentSum  float64 // their cost
	mean       mean
	softWarned string // the period whose soft budget crossing was logged
}

type ended struct {
	cost float64
	at   time.Time
}

// mean is a running mean of call costs, weighted to the recent ones.
type mean struct {
	v float64
	n int
}

func (m *mean) add(cost float64) {
	m.n++
	w := max(1/float64(m.n), 0.1)
	m.v += (cost - m.v) * w
}

// budgeted is a scope of a principal with its budget.
type budgeted struct {
	name    string
	created time.Time
	budget  auth.Budget
	what    string // "key", "team": for messages
}

// (into buf: an admission allocates no list).
func budgetsOf(p auth.Principal, buf *[2]budgeted) []budgeted {
	if p.Admin {
		return nil // the master key has no budget (LiteLLM's)
	}
	out := buf[:0]
	if k := p.Key; k != nil && k.Budgeted() {
		out = append(out, budgeted{"key:" + k.Token, k.CreatedAt, k.Budget, "key"})
	}
	if t := p.Team; t != nil && t.Budgeted() {
		out = append(out, budgeted{"team:" + t.TeamID, t.CreatedAt, t.Budget, "team"})
	}
	return out
}

// Tab is what one admitted call reserved; its priced log event
// (Pricer.Price) settles it with its cost (Settle ends one that has none).
type Tab struct {
	b        *Budgets
	scopes   []*scope // in own
	own      [2]*scope
	estimate float64
	mu       sync.Mutex
	cost     float64
	priced   bool
	settled  bool
}

// tabOf is the Tab of the call admitted with ctx (carried by one
// ctxvalue layer: the layer and the Tab are one allocation).
func tabOf(ctx context.Context) *Tab { return ctxvalue.From[Tab](ctx) }

// settleWith settles the call with the cost of its log event.
func (t *Tab) settleWith(cost float64) {
	t.mu.Lock()
	t.cost += cost
	t.priced = true
	t.mu.Unlock()
	t.settle()
}

// Admit checks p's budgets before a call: a scope whose spend and
// reservations have reached its max_budget refuses it (400
// budget_exceeded). An admitted call reserves its estimated cost until
// Settle(ctx) with the returned context. A batch line's call (ctx from
// WithBatchLine) does not count what is left of its own batch's
// reservation, and reserves nothing more while its batch's reservation
// lasts: that is what the reservation is for. A principal without budgets
// costs nothing here.
func (b *Budgets) Admit(ctx context.Context, p auth.Principal) (context.Context, error) {
	var buf [2]budgeted
	list := budgetsOf(p, &buf)
	if len(list) == 0 {
		return ctx, nil
	}
	now := b.opts.Now()
	var own2 [2]*scope
	scopes := own2[:len(list)]
	for i, bg := range list {
		s, err := b.fresh(ctx, bg, now)
		if err != nil {
			return ctx, err
		}
		scopes[i] = s
	}
	var alerts []*logevent.Event
	defer func() {
		// Published outside the lock: in Lambda a publish is awaited.
		for _, ev := range alerts {
			b.opts.Alerts.Emit(context.WithoutCancel(ctx), ev)
		}
	}()
	var own float64
	if l := batchLineOf(ctx); l != nil {
		own = l.Reserved
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, bg := range list {
		s := scopes[i]
		spent := s.stored + s.recentCost(now, b.opts.Settle)
		reserved := max(s.reserved-own, 0)
		// Compared in nano-USD, as the store counts: float sums of costs
		// land a hair under a budget they equal (100 × 1e-6 + 50 × 2e-6 is
		// 0.00019999999999999998 in float64).
		if soft := bg.budget.SoftBudget; soft != nil && nanos(spent) >= nanos(*soft) && s.softWarned != s.period {
			s.softWarned = s.period
			slog.WarnContext(ctx, "spend: soft budget crossed", "scope", bg.what, "id", scopeID(bg.name),
				"spend", spent, "soft_budget", *soft, "max_budget", fmtBudget(bg.budget.MaxBudget))
			if b.opts.Alerts != nil {
				alerts = append(alerts, alertEvent(ctx, p, bg, s.period, spent, now))
			}
		}
		if max := bg.budget.MaxBudget; max != nil && nanos(spent+reserved+s.inflight) >= nanos(*max) {
			msg := fmt.Sprintf("Budget has been exceeded! Current cost: %v, Max budget: %v (the %s's budget", spent, *max, bg.what)
			if reserved > 0 {
				msg += fmt.Sprintf("; running batches reserve %v more", reserved)
			}
			if s.inflight > 0 {
				msg += fmt.Sprintf("; calls in flight are estimated at %v more", s.inflight)
			}
			return ctx, &api.Error{Status: 400, Type: CodeBudgetExceeded, Code: CodeBudgetExceeded, Message: msg + ")."}
		}
	}
	// A new name: the deferred alerts go out with the caller's ctx, not
	// this call's Tab (an alert priced with it would settle the call at 0).
	tabCtx, t := ctxvalue.With(ctx, Tab{b: b, own: own2})
	t.scopes = t.own[:len(scopes)]
	for _, s := range scopes {
		if own > 0 {
			break // the line's batch reserved its cost
		}
		est := b.mean.v
		if s.mean.n > 0 {
			est = s.mean.v
		}
		t.estimate = max(t.estimate, est)
	}
	for _, s := range scopes {
		s.inflight += t.estimate
	}
	return tabCtx, nil
}

// alertEvent is the log event of bg's soft budget crossed in period. Its
// id names the scope and period, so destinations see one per period even
// when several processes cross it.
func alertEvent(ctx context.Context, p auth.Principal, bg budgeted, period string, spent float64, now time.Time) *logevent.Event {
	ev := logevent.New(ctx, p, logevent.CallBudgetAlert)
	ev.ID = "budget-alert-" + bg.what + "-" + scopeID(bg.name) + "-" + period
	ev.TraceID = ev.ID
	ev.SetTimes(now, now, now)
	a := &logevent.BudgetAlert{Type: "soft_budget_crossed", Scope: bg.what, ID: scopeID(bg.name),
		Spend: spent, SoftBudget: *bg.budget.SoftBudget, MaxBudget: bg.budget.MaxBudget, Period: period}
	if _, reset := Period(bg.created, bg.budget.BudgetDuration, now); reset != nil {
		r := reset.Unix()
		a.ResetAt = &r
	}
	ev.BudgetAlert = a
	return ev
}

// Budgeted reports whether p has a budget to check.
func (b *Budgets) Budgeted(p auth.Principal) bool {
	var buf [2]budgeted
	return len(budgetsOf(p, &buf)) > 0
}

// Settle ends the call admitted with ctx (Admit): its reservation is
// replaced by what its log events cost, counted until the stored spend
// has it. Settling twice, or a ctx without a call, does nothing.
func Settle(ctx context.Context) {
	if t := tabOf(ctx); t != nil {
		t.settle()
	}
}

func (t *Tab) settle() {
	t.mu.Lock()
	if t.settled {
		t.mu.Unlock()
		return
	}
	t.settled = true
	cost, priced := t.cost, t.priced
	t.mu.Unlock()
	b := t.b
	now := b.opts.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, s := range t.scopes {
		s.inflight = max(s.inflight-t.estimate, 0)
		if priced {
			s.recent = append(s.recent, ended{cost: cost, at: now})
			s.recentSum += cost
			s.mean.add(cost)
		}
	}
	if priced {
		b.mean.add(cost)
	}
}

// maxScopes bounds the budget states a process keeps; past it, the idle
// ones (nothing in flight or recent) are dropped — re-read from the store
// when their key comes back.
const maxScopes = 10000

func (b *Budgets) prune(now time.Time) {
	for name, s := range b.scopes {
		if s.inflight == 0 && s.reserved == 0 && s.recentCost(now, b.opts.Settle) == 0 {
			delete(b.scopes, name)
		}
	}
}

// recentCost is the cost of the calls that ended within settle of now.
// The calls are appended as they end, so the expired ones are at the front:
// dropping them is amortised O(1) a call where a scan of every call of the
// last few seconds made a busy key's admission grow with its rate. (Two
// settles may append a few microseconds out of order; an entry behind a
// later one is dropped with it, that much late.)
func (s *scope) recentCost(now time.Time, settle time.Duration) float64 {
	i := 0
	for i < len(s.recent) && now.Sub(s.recent[i].at) >= settle {
		s.recentSum -= s.recent[i].cost
		i++
	}
	s.recent = s.recent[i:]
	if len(s.recent) == 0 {
		s.recent, s.recentSum = nil, 0 // no float drift across idle moments
	}
	return s.recentSum
}

// fresh returns bg's scope state for the period of now, its stored spend
// read again when older than Refresh.
func (b *Budgets) fresh(ctx context.Context, bg budgeted, now time.Time) (*scope, error) {
	k, d := periodIndex(bg.created, bg.budget.BudgetDuration, now)
	b.mu.Lock()
	s := b.scopes[bg.name]
	if s == nil {
		if len(b.scopes) >= maxScopes {
			b.prune(now)
		}
		s = &scope{name: bg.name}
		b.scopes[bg.name] = s
	}
	if s.period == "" || s.periodK != k || s.periodD != d {
		period := "all"
		if d != 0 {
			period = strconv.FormatInt(k, 10)
		}
		if s.period != period {
			// A new period: the spend of the old one no longer counts.
			s.stored, s.readAt, s.recent, s.recentSum = 0, time.Time{}, nil, 0
		}
		s.period, s.periodK, s.periodD = period, k, d
	}
	period := s.period
	stale := now.Sub(s.readAt) >= b.opts.Refresh
	b.mu.Unlock()
	if !stale {
		return s, nil
	}
	stored, err := b.stored(ctx, bg.name, period)
	if err != nil {
		return nil, err
	}
	var reserved float64
	if bg.budget.MaxBudget != nil {
		// Only a max budget is reserved against (Reserve).
		if reserved, err = b.storedReserved(ctx, bg.name); err != nil {
			return nil, err
		}
	}
	b.mu.Lock()
	s.reserved = reserved
	if s.period == period {
		s.stored, s.readAt = stored, now
	}
	b.mu.Unlock()
	return s, nil
}

// stored reads a scope's stored spend in period, USD.
func (b *Budgets) stored(ctx context.Context, scope, period string) (float64, error) {
	rec, err := b.records.Get(ctx, periodKey(scope, period))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("spend: read %s's spend: %w", scope, err)
	}
	return usd(rec.Counters[counterCost]), nil
}

// Spent is what a scope ("key:<token>", "team:<id>") created at created
// has spent in its budget period now, as stored (auth.SpendReader).
func (b *Budgets) Spent(ctx context.Context, scope string, created time.Time, budget auth.Budget) (auth.BudgetState, error) {
	period, reset := Period(created, budget.BudgetDuration, b.opts.Now())
	v, err := b.stored(ctx, scope, period)
	return auth.BudgetState{Spend: v, BudgetResetAt: reset}, err
}

func scopeID(name string) string {
	for i := range name {
		if name[i] == ':' {
			return name[i+1:]
		}
	}
	return name
}

func fmtBudget(v *float64) any {
	if v == nil {
		return nil
	}
	return *v
}
