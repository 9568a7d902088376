package spend

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/sluice-gateway/sluice/pkg/api"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// A batch's reservation. A batch's create reserves its worst-case cost (its
// dry run's estimate) against its key's and team's max budgets, in the same
// transaction that creates it; its lines give the reservation back share by
// share as they are committed (the engine's exactly-once line settlement
// carries the writes), and what is left is released by the write that ends
// the batch. Every other call's admission sees spend + reserved, so the
// batch's worst case cannot be spent by others while it runs.

// reservedKey is the record holding a scope's reservations: nano-USD the
// running batches of the scope may still spend. Not per budget period: a
// batch runs across a period's end with the reservation it made.
func reservedKey(scope string) store.Key { return store.Key{PK: "SPEND#" + scope, SK: "RESERVED"} }

// Reservation is what a batch holds of its budgets: NUSD nano-USD in each
// of Scopes ("key:<token>", "team:<id>"). Its zero value holds nothing.
type Reservation struct {
	Scopes []string `json:"scopes"`
	NUSD   int64    `json:"nusd"`
}

// Holds reports whether r reserves anything.
func (r Reservation) Holds() bool { return len(r.Scopes) > 0 && r.NUSD > 0 }

// Adds are the writes that add delta nano-USD to r's scopes' reservations
// (negative: give back). They go in the transaction that records why (a
// create, a line's commit, the batch's end), which is what makes them
// happen exactly once.
func (r Reservation) Adds(delta int64) []store.Write {
	if delta == 0 {
		return nil
	}
	out := make([]store.Write, len(r.Scopes))
	for i, s := range r.Scopes {
		out[i] = store.Write{Kind: store.WriteAdd, Record: store.Record{Key: reservedKey(s), Counters: map[string]int64{counterCost: delta}}}
	}
	return out
}

// USD is n nano-USD in USD.
func USD(n int64) float64 { return usd(n) }

// NanoUSD is v USD in nano-USD.
func NanoUSD(v float64) int64 { return nanos(v) }

// Reserve checks that work estimated at up to cost USD fits p's max
// budgets — each scope's spend, its reservations, its calls in flight and
// the cost within max_budget — and returns the reservation and its writes,
// to be put in the transaction that creates the work. Each write's
// condition bounds the scope's reservations at what fits, so two creates
// racing for the last room (in any process) cannot both take it: the
// transaction fails its condition (ErrConditionFailed), and the caller
// answers Exceeded. A principal without a max budget, or work of no known
// cost, reserves nothing (nil writes).
func (b *Budgets) Reserve(ctx context.Context, p auth.Principal, cost float64) (Reservation, []store.Write, error) {
	n := nanos(cost)
	if n <= 0 {
		return Reservation{}, nil, nil
	}
	now := b.opts.Now()
	var r Reservation
	var writes []store.Write
	var buf [2]budgeted
	for _, bg := range budgetsOf(p, &buf) {
		max := bg.budget.MaxBudget
		if max == nil {
			continue
		}
		b.forget(bg.name) // a create is rare: read the spend and reservations as they are
		s, err := b.fresh(ctx, bg, now)
		if err != nil {
			return Reservation{}, nil, err
		}
		b.mu.Lock()
		spent := s.stored + s.recentCost(now, b.opts.Settle)
		inflight, reserved := s.inflight, s.reserved
		b.mu.Unlock()
		if spent+reserved+inflight+cost > *max {
			return Reservation{}, nil, Exceeded(bg.what, spent, *max, reserved, inflight, cost)
		}
		// At most what fits given the spend read: reservations made since
		// (by any process) are seen by the condition, not by this read.
		room := nanos(*max) - nanos(spent) - nanos(inflight) - n
		r.Scopes = append(r.Scopes, bg.name)
		writes = append(writes, store.Write{Kind: store.WriteAdd,
			Record: store.Record{Key: reservedKey(bg.name), Counters: map[string]int64{counterCost: n}},
			Cond:   store.Cond{AtMost: map[string]int64{counterCost: room}}})
	}
	if len(r.Scopes) == 0 {
		return Reservation{}, nil, nil
	}
	r.NUSD = n
	return r, writes, nil
}

// Took tells this process's admissions that r was taken (its create
// committed), so they count it at once rather than at their next read of
// the store (BudgetOptions.Refresh); Released, that it was given back.
func (b *Budgets) Took(r Reservation)     { b.move(r, usd(r.NUSD)) }
func (b *Budgets) Released(r Reservation) { b.forgetAll(r) }

func (b *Budgets) move(r Reservation, delta float64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, name := range r.Scopes {
		if s := b.scopes[name]; s != nil {
			s.reserved += delta
		}
	}
}

func (b *Budgets) forgetAll(r Reservation) {
	for _, name := range r.Scopes {
		b.forget(name)
	}
}

// forget makes the next admission of scope read its spend again.
func (b *Budgets) forget(name string) {
	b.mu.Lock()
	if s := b.scopes[name]; s != nil {
		s.readAt = time.Time{}
	}
	b.mu.Unlock()
}

// Exceeded is the 400 budget_exceeded of a batch estimated at up to cost
// USD that a scope (what: "key", "team") cannot hold.
func Exceeded(what string, spent, max, reserved, inflight, cost float64) error {
	return &api.Error{Status: 400, Type: CodeBudgetExceeded, Code: CodeBudgetExceeded, Message: fmt.Sprintf(
		"Budget has been exceeded! Current cost: %v, Max budget: %v (the %s's budget; this batch is estimated at up to %v, running batches reserve %v, calls in flight %v).",
		spent, max, what, cost, reserved, inflight)}
}

// ExceededRace is Exceeded when a create lost the last room to another
// one at the same moment (its reservation's condition failed).
func ExceededRace(cost float64) error {
	return &api.Error{Status: 400, Type: CodeBudgetExceeded, Code: CodeBudgetExceeded, Message: fmt.Sprintf(
		"Budget has been exceeded! This batch is estimated at up to %v, more than the budget has left once the running batches created meanwhile reserve theirs.", cost)}
}

// storedReserved reads a scope's reservations, USD.
func (b *Budgets) storedReserved(ctx context.Context, scope string) (float64, error) {
	rec, err := b.records.Get(ctx, reservedKey(scope))
	if errors.Is(err, store.ErrNotFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("spend: read %s's reservations: %w", scope, err)
	}
	return usd(rec.Counters[counterCost]), nil
}

// Reserved is what a scope's running batches hold, as stored.
func (b *Budgets) Reserved(ctx context.Context, scope string) (float64, error) {
	return b.storedReserved(ctx, scope)
}

// BatchLine ties a call to the batch line it runs: the line's admission
// does not count its own batch's reservation against it (the line is what
// the reservation is for), and the call's priced cost is added up here for
// the batch's settled cost.
type BatchLine struct {
	// Reserved is the line's batch's reservation, USD.
	Reserved float64
	cost     atomic.Int64 // nano-USD
}

type batchLineKey struct{}

// WithBatchLine marks the calls made with ctx as line l of a batch.
func WithBatchLine(ctx context.Context, l *BatchLine) context.Context {
	return context.WithValue(ctx, batchLineKey{}, l)
}

func batchLineOf(ctx context.Context) *BatchLine {
	l, _ := ctx.Value(batchLineKey{}).(*BatchLine)
	return l
}

// Cost is what the line's calls cost, as priced.
func (l *BatchLine) Cost() float64 { return usd(l.cost.Load()) }

// NanoCost is Cost in nano-USD.
func (l *BatchLine) NanoCost() int64 { return l.cost.Load() }
