package spend_test

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/gateway/gatewaytest"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/spend"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// principals answers every key as one key of one team, both created at
// created, with hourly budgets.
type principals struct{ created time.Time }

func (p principals) PrincipalOf(_ context.Context, token string) (auth.Principal, error) {
	b := auth.Budget{BudgetDuration: "1h"}
	return auth.Principal{TeamID: "t1",
		Key:  &auth.KeyInfo{Token: token, TeamID: "t1", CreatedAt: p.created, Budget: b},
		Team: &auth.Team{TeamID: "t1", CreatedAt: p.created, Budget: b}}, nil
}

func event(id string, at time.Time, cost float64) *logevent.Event {
	return &logevent.Event{ID: id, Model: "gpt-x", ModelGroup: "gpt", ResponseCost: cost, PromptTokens: 10, CompletionTokens: 5, TotalTokens: 15,
		StartTime: float64(at.UnixNano()) / 1e9,
		Metadata:  logevent.Metadata{UserAPIKeyHash: "tok1", UserAPIKeyTeamID: "t1", RequestID: id}}
}

// each runs f on every storage backend.
func each(t *testing.T, f func(t *testing.T, records store.Records)) {
	for _, b := range gatewaytest.Backends() {
		t.Run(b.Name, func(t *testing.T) { f(t, b.Open(t).Records) })
	}
}

func report(t *testing.T, records store.Records, day, groupBy string) *spend.Report {
	t.Helper()
	rep, err := spend.Reports{Records: records}.Report(context.Background(), auth.Principal{Admin: true, TeamID: auth.AdminTeam}, day, day, groupBy)
	if err != nil {
		t.Fatal(err)
	}
	return rep
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

func TestCounterCountsEachEventOnceAcrossRedeliveries(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		created := time.Now().Add(-90 * time.Minute)
		c := spend.NewCounter(records, principals{created}, spend.CounterOptions{Linger: time.Millisecond})
		ctx := context.Background()
		now := time.Now()
		a, b := event("req-a", now, 0.25), event("req-b", now, 0.5)
		if err := c.Count(ctx, []*logevent.Event{a, b}); err != nil {
			t.Fatal(err)
		}
		// A redelivery of the same message, then one that also holds a new
		// event: only the new one counts.
		if err := c.Count(ctx, []*logevent.Event{a, b}); err != nil {
			t.Fatal(err)
		}
		if err := c.Count(ctx, []*logevent.Event{b, event("req-c", now, 1), event("req-c", now, 1)}); err != nil {
			t.Fatal(err)
		}
		day := now.UTC().Format(time.DateOnly)
		for _, groupBy := range []string{"team", "api_key", "model"} {
			rep := report(t, records, day, groupBy)
			if len(rep.Data) != 1 || !near(rep.Total.Spend, 1.75) || rep.Total.Requests != 3 || rep.Total.InputTokens != 30 || rep.Total.OutputTokens != 15 {
				t.Errorf("group_by %s: %+v", groupBy, rep)
			}
		}
		// The budget period: created 90 minutes ago, hourly → period 1.
		b2 := spend.NewBudgets(records, spend.BudgetOptions{})
		st, err := b2.Spent(ctx, "key:tok1", created, auth.Budget{BudgetDuration: "1h"})
		if err != nil {
			t.Fatal(err)
		}
		if !near(st.Spend, 1.75) || st.BudgetResetAt == nil || !st.BudgetResetAt.Equal(created.Add(2*time.Hour).UTC()) {
			t.Errorf("key period spend %v, reset %v", st.Spend, st.BudgetResetAt)
		}
	})
}

func TestCounterSplitsWhatOneTransactionCannotHold(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		c := spend.NewCounter(records, principals{time.Now()}, spend.CounterOptions{Linger: time.Millisecond})
		now := time.Now()
		var events []*logevent.Event
		for i := range 250 {
			events = append(events, event(fmt.Sprintf("req-%d", i), now, 0.001))
		}
		if err := c.Count(context.Background(), events); err != nil {
			t.Fatal(err)
		}
		// Again, with half of them counted before.
		more := append(events[125:], event("req-new", now, 0.001))
		if err := c.Count(context.Background(), more); err != nil {
			t.Fatal(err)
		}
		rep := report(t, records, now.UTC().Format(time.DateOnly), "team")
		if rep.Total.Requests != 251 || !near(rep.Total.Spend, 0.251) {
			t.Errorf("counted %d requests, %v USD; want 251, 0.251", rep.Total.Requests, rep.Total.Spend)
		}
	})
}

func TestCounterGroupsConcurrentCountsIntoFewWrites(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		c := spend.NewCounter(records, principals{time.Now()}, spend.CounterOptions{Linger: 100 * time.Millisecond})
		now := time.Now()
		var wg sync.WaitGroup
		for i := range 40 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := c.Count(context.Background(), []*logevent.Event{event(fmt.Sprintf("req-%d", i), now, 0.01)}); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		// 40 calls of one key, team and model: 5 counters (3 days, 2
		// periods) written once a flush, not once a call.
		if c.Flushes > 3 || c.CounterWrites > 5*c.Flushes {
			t.Errorf("%d flushes, %d counter writes for 40 calls", c.Flushes, c.CounterWrites)
		}
		if rep := report(t, records, now.UTC().Format(time.DateOnly), "api_key"); rep.Total.Requests != 40 {
			t.Errorf("counted %d requests, want 40", rep.Total.Requests)
		}
	})
}

// Under a closed loop of one key's calls, each of its counters is written
// at most once a linger (5 times a second): the writes a key costs do not
// grow with its calls.
func TestCounterWritesPerKeyUnderLoad(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		c := spend.NewCounter(records, principals{time.Now()}, spend.CounterOptions{})
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		start := time.Now()
		var wg sync.WaitGroup
		var calls atomic.Int64
		for w := range 32 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := 0; ctx.Err() == nil; i++ {
					if err := c.Count(ctx, []*logevent.Event{event(fmt.Sprintf("w%d-%d", w, i), start, 0.001)}); err != nil && ctx.Err() == nil {
						t.Error(err)
						return
					}
					calls.Add(1)
				}
			}()
		}
		wg.Wait()
		secs := time.Since(start).Seconds()
		perCounter := float64(c.CounterWrites) / 5 / secs // 5 counters: 3 day rows, 2 period rows
		t.Logf("%d calls in %.1f s: %d flushes, %.1f writes/s per counter of the key, %d item writes in all", calls.Load(), secs, c.Flushes, perCounter, c.Writes)
		if perCounter > 5.5 {
			t.Errorf("%.1f writes/s per counter, want ≤ 5", perCounter)
		}
	})
}

// failing fails every transaction that writes the dedupe record of event
// id, as a timed-out or throttled transaction does.
type failing struct {
	store.Records
	id string
}

func (f failing) Transact(ctx context.Context, writes []store.Write) error {
	for _, w := range writes {
		if w.Record.Key.PK == "SPEND#EVENT#"+f.id {
			return fmt.Errorf("transaction of %s: %w", f.id, store.ErrUnavailable)
		}
	}
	return f.Records.Transact(ctx, writes)
}

// A transaction of a flush that fails fails the callers whose events it
// held, and only them: the others' messages are acknowledged, not all
// redelivered and counted again (a backlog that would feed itself).
func TestCounterFailsOnlyTheCallersOfAFailedTransaction(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		c := spend.NewCounter(failing{records, "a-0"}, principals{time.Now()}, spend.CounterOptions{Linger: 200 * time.Millisecond})
		now := time.Now()
		var a []*logevent.Event
		for i := range 200 { // more than one transaction holds
			a = append(a, event(fmt.Sprintf("a-%d", i), now, 0.001))
		}
		errA := make(chan error, 1)
		go func() { errA <- c.Count(context.Background(), a) }()
		time.Sleep(50 * time.Millisecond) // joins a's flush, after a's events
		if err := c.Count(context.Background(), []*logevent.Event{event("b-0", now, 0.001)}); err != nil {
			t.Errorf("b's event, in a transaction that succeeded: %v", err)
		}
		if err := <-errA; err == nil {
			t.Error("a's events, one transaction of them failed: counted without error")
		}
		// a's first transaction failed; its others and b's are counted.
		rep := report(t, records, now.UTC().Format(time.DateOnly), "team")
		if rep.Total.Requests == 0 || rep.Total.Requests >= 201 {
			t.Errorf("counted %d requests, want those of the transactions that succeeded", rep.Total.Requests)
		}
	})
}

// A named message is counted once under one dedupe record, however often
// it comes: again after its count (a redelivery, a crash before the ack),
// and twice at once (SNS's duplicate beside the queue's redelivery).
func TestCounterCountsANamedMessageOnce(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		c := spend.NewCounter(records, principals{time.Now()}, spend.CounterOptions{Linger: 20 * time.Millisecond})
		ctx := context.Background()
		now := time.Now()
		var events []*logevent.Event
		for i := range 1000 { // a batch's message: one key, team and model
			events = append(events, event(fmt.Sprintf("line-%d", i), now, 0.001))
		}
		if err := c.CountMessage(ctx, events[0].ID, events); err != nil {
			t.Fatal(err)
		}
		if c.Records != 1 {
			t.Errorf("%d dedupe records for one message of 1,000 events, want 1", c.Records)
		}
		var wg sync.WaitGroup
		for range 3 {
			wg.Go(func() {
				if err := c.CountMessage(ctx, events[0].ID, events); err != nil {
					t.Error(err)
				}
			})
		}
		wg.Wait()
		// Another message holds new events: it counts.
		more := []*logevent.Event{event("call-1", now, 0.5), event("call-2", now, 0.25)}
		if err := c.CountMessage(ctx, more[0].ID, more); err != nil {
			t.Fatal(err)
		}
		rep := report(t, records, now.UTC().Format(time.DateOnly), "api_key")
		if rep.Total.Requests != 1002 || !near(rep.Total.Spend, 1.75) {
			t.Errorf("counted %d requests, %v USD; want 1002, 1.75", rep.Total.Requests, rep.Total.Spend)
		}
	})
}

// Events that can be emitted again under the same IDs (a native batch's
// lines, copied again after a retry) are counted one by one even in a named
// message: the same lines in a message of another name count once.
func TestCounterCountsNativeBatchLinesByEvent(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		c := spend.NewCounter(records, principals{time.Now()}, spend.CounterOptions{Linger: time.Millisecond})
		ctx := context.Background()
		now := time.Now()
		a, b := event("batch_req_1", now, 0.5), event("batch_req_2", now, 0.25)
		a.NativeBatch, b.NativeBatch = true, true
		for _, name := range []string{"copy-1", "copy-2"} {
			if err := c.CountMessage(ctx, name, []*logevent.Event{a, b}); err != nil {
				t.Fatal(err)
			}
		}
		rep := report(t, records, now.UTC().Format(time.DateOnly), "team")
		if rep.Total.Requests != 2 || !near(rep.Total.Spend, 0.75) {
			t.Errorf("counted %d requests, %v USD; want 2, 0.75", rep.Total.Requests, rep.Total.Spend)
		}
	})
}

// keys answers each key as its own key of team t1.
type keys struct{ created time.Time }

func (k keys) PrincipalOf(_ context.Context, token string) (auth.Principal, error) {
	b := auth.Budget{BudgetDuration: "1h"}
	return auth.Principal{TeamID: "t1",
		Key:  &auth.KeyInfo{Token: token, TeamID: "t1", CreatedAt: k.created, Budget: b},
		Team: &auth.Team{TeamID: "t1", CreatedAt: k.created, Budget: b}}, nil
}

// failOnce fails the first transaction that goes on with a message counted
// in part (a write of its dedupe record conditional on the count before),
// as a timed-out transaction or a crash between two parts does.
type failOnce struct {
	store.Records
	failed *atomic.Bool
}

func (f failOnce) Transact(ctx context.Context, writes []store.Write) error {
	for _, w := range writes {
		if strings.HasPrefix(w.Record.Key.PK, "SPEND#MESSAGE#") && w.Cond.Version > 0 && f.failed.CompareAndSwap(false, true) {
			return fmt.Errorf("transaction: %w", store.ErrUnavailable)
		}
	}
	return f.Records.Transact(ctx, writes)
}

// A message too large for one transaction (here: 150 keys, two counters
// each) is counted in parts; one that fails between parts leaves the
// message for redelivery, which resumes where the record says and counts
// nothing twice.
func TestCounterResumesAMessageCountedInParts(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		var failed atomic.Bool
		c := spend.NewCounter(failOnce{records, &failed}, keys{time.Now()}, spend.CounterOptions{Linger: time.Millisecond})
		ctx := context.Background()
		now := time.Now()
		var events []*logevent.Event
		for i := range 150 {
			ev := event(fmt.Sprintf("call-%d", i), now, 0.001)
			ev.Metadata.UserAPIKeyHash = fmt.Sprintf("tok-%d", i)
			events = append(events, ev)
		}
		if err := c.CountMessage(ctx, events[0].ID, events); err == nil || !failed.Load() {
			t.Fatalf("count with a part failing: %v (failed: %v), want an error", err, failed.Load())
		}
		rep := report(t, records, now.UTC().Format(time.DateOnly), "team")
		if rep.Total.Requests == 0 || rep.Total.Requests >= 150 {
			t.Fatalf("after a failed part: %d requests counted, want the first part's", rep.Total.Requests)
		}
		for range 2 { // redelivered, then once more after its count
			if err := c.CountMessage(ctx, events[0].ID, events); err != nil {
				t.Fatal(err)
			}
		}
		rep = report(t, records, now.UTC().Format(time.DateOnly), "team")
		if rep.Total.Requests != 150 || !near(rep.Total.Spend, 0.15) {
			t.Errorf("counted %d requests, %v USD; want 150, 0.15", rep.Total.Requests, rep.Total.Spend)
		}
	})
}

// BenchmarkCounterCountMessage counts a message of 64 calls (the handoff's
// round at a few thousand calls a second) on the local backend: its
// allocations per op are the counter's per-event work (its linger is 1 ms).
func BenchmarkCounterCountMessage(b *testing.B) {
	records := gatewaytest.Backends()[0].Open(b).Records
	c := spend.NewCounter(records, principals{time.Now()}, spend.CounterOptions{Linger: time.Millisecond})
	ctx := context.Background()
	now := time.Now()
	events := make([]*logevent.Event, 64)
	for i := range events {
		events[i] = event(fmt.Sprintf("call-%d", i), now, 0.001)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if err := c.CountMessage(ctx, "msg-"+strconv.Itoa(i), events); err != nil {
			b.Fatal(err)
		}
	}
}

// The events of one flush may fall on different UTC days (a flush around
// midnight, a redelivery): each counts on its own day's rows, however they
// are interleaved.
func TestCounterFilesEachEventUnderItsOwnDay(t *testing.T) {
	each(t, func(t *testing.T, records store.Records) {
		c := spend.NewCounter(records, principals{time.Now().Add(-72 * time.Hour)}, spend.CounterOptions{Linger: 20 * time.Millisecond})
		day1 := time.Date(2026, 11, 27, 23, 59, 59, 0, time.UTC)
		day2 := day1.Add(2 * time.Second)
		events := []*logevent.Event{event("d1-a", day1, 0.5), event("d2-a", day2, 0.25), event("d1-b", day1, 0.125)}
		if err := c.CountMessage(context.Background(), "midnight", events); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			day      time.Time
			requests int64
			spend    float64
		}{{day1, 2, 0.625}, {day2, 1, 0.25}} {
			rep := report(t, records, tc.day.Format(time.DateOnly), "model")
			if rep.Total.Requests != tc.requests || !near(rep.Total.Spend, tc.spend) {
				t.Errorf("%s: %d requests, %v USD; want %d, %v", tc.day.Format(time.DateOnly), rep.Total.Requests, rep.Total.Spend, tc.requests, tc.spend)
			}
		}
	})
}

// resolving counts the keys PrincipalOf resolves.
type resolving struct {
	principals
	mu    sync.Mutex
	asked map[string]int
}

func (r *resolving) PrincipalOf(ctx context.Context, token string) (auth.Principal, error) {
	r.mu.Lock()
	r.asked[token]++
	r.mu.Unlock()
	return r.principals.PrincipalOf(ctx, token)
}

// A flush resolves each key once, however many of its events it counts,
// and counts every event's budget periods as before.
func TestCounterResolvesEachKeyOnceAFlush(t *testing.T) {
	records := gatewaytest.Backends()[0].Open(t).Records
	r := &resolving{principals: principals{time.Now()}, asked: map[string]int{}}
	c := spend.NewCounter(records, r, spend.CounterOptions{Linger: time.Millisecond})
	now := time.Now()
	var events []*logevent.Event
	for i := range 10 {
		ev := event(fmt.Sprint("req-", i), now, 0.5)
		ev.Metadata.UserAPIKeyHash = fmt.Sprint("tok", i%2)
		events = append(events, ev)
	}
	if err := c.CountMessage(context.Background(), "m1", events); err != nil {
		t.Fatal(err)
	}
	if r.asked["tok0"] != 1 || r.asked["tok1"] != 1 || len(r.asked) != 2 {
		t.Errorf("keys resolved %v, want each once", r.asked)
	}
	for _, scope := range []string{"key:tok0", "key:tok1", "team:t1"} {
		want := 2.5
		if scope == "team:t1" {
			want = 5
		}
		period, _ := spend.Period(r.created, "1h", now)
		rec, err := records.Get(context.Background(), store.Key{PK: "SPEND#" + scope, SK: "PERIOD#" + period})
		if err != nil || !near(float64(rec.Counters["nusd"])/1e9, want) {
			t.Errorf("%s: %v %v, want %v USD", scope, rec.Counters, err, want)
		}
	}
}
