package spend

import (
	"context"
	"fmt"
	"math"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

func TestPeriodsCountFromCreation(t *testing.T) {
	created := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		duration string
		at       time.Time
		id       string
		reset    string
	}{
		{"", created.Add(100 * 24 * time.Hour), "all", ""},
		{"1d", created.Add(time.Hour), "0", "2026-11-02T10:00:00Z"},
		{"1d", created.Add(24 * time.Hour), "1", "2026-11-03T10:00:00Z"},
		{"30s", created.Add(95 * time.Second), "3", "2026-11-01T10:02:00Z"},
		{"1h", created.Add(-time.Hour), "0", "2026-11-01T11:00:00Z"}, // a clock behind the creation
	} {
		id, reset := Period(created, tc.duration, tc.at)
		got := ""
		if reset != nil {
			got = reset.Format(time.RFC3339)
		}
		if id != tc.id || got != tc.reset {
			t.Errorf("%s at %v: period %s resetting %s, want %s resetting %s", tc.duration, tc.at, id, got, tc.id, tc.reset)
		}
	}
}

func TestBudgetStatesAreBounded(t *testing.T) {
	b, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	budgets := NewBudgets(b.Records, BudgetOptions{})
	max := 1.0
	for i := range maxScopes + 10 {
		p := auth.Principal{TeamID: "t", Key: &auth.KeyInfo{Token: fmt.Sprint("tok", i), Budget: auth.Budget{MaxBudget: &max}}}
		ctx, err := budgets.Admit(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		Settle(ctx)
	}
	if n := len(budgets.scopes); n > maxScopes {
		t.Errorf("%d budget states kept, want at most %d", n, maxScopes)
	}
}

// alertLog records the alerts Budgets publishes.
type alertLog struct {
	mu     sync.Mutex
	events []*logevent.Event
}

func (l *alertLog) Emit(_ context.Context, ev *logevent.Event) {
	l.mu.Lock()
	l.events = append(l.events, ev)
	l.mu.Unlock()
}

// A soft budget crossing publishes one typed log event per scope and
// period in a process, and the spend counters skip it.
func TestASoftBudgetCrossingIsALogEventOncePerPeriod(t *testing.T) {
	b, err := local.Open(t.TempDir(), local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	created := time.Date(2026, 11, 1, 10, 0, 0, 0, time.UTC)
	now := created.Add(time.Second)
	alerts := &alertLog{}
	budgets := NewBudgets(b.Records, BudgetOptions{Alerts: alerts, Now: func() time.Time { return now }})
	soft, max := 0.0, 1.0
	p := auth.Principal{TeamID: "t", Key: &auth.KeyInfo{Token: "tok", CreatedAt: created,
		Budget: auth.Budget{MaxBudget: &max, SoftBudget: &soft, BudgetDuration: "30s"}}}
	admit := func() {
		ctx, err := budgets.Admit(context.Background(), p)
		if err != nil {
			t.Fatal(err)
		}
		Settle(ctx)
	}
	admit()
	admit()
	now = now.Add(30 * time.Second) // the next period
	admit()
	if len(alerts.events) != 2 {
		t.Fatalf("%d alert events, want one per period (2)", len(alerts.events))
	}
	ev := alerts.events[0]
	reset := created.Add(30 * time.Second).Unix()
	want := &logevent.BudgetAlert{Type: "soft_budget_crossed", Scope: "key", ID: "tok", SoftBudget: 0, MaxBudget: &max, Period: "0", ResetAt: &reset}
	if ev.CallType != logevent.CallBudgetAlert || ev.ID != "budget-alert-key-tok-0" || ev.Metadata.UserAPIKeyTeamID != "t" {
		t.Errorf("event %+v", ev)
	}
	if diff := cmp.Diff(want, ev.BudgetAlert); diff != "" {
		t.Errorf("alert (-want +got):\n%s", diff)
	}
	c := NewCounter(b.Records, nil, CounterOptions{Linger: time.Millisecond})
	if err := c.Count(context.Background(), alerts.events); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Records.Get(context.Background(), dedupeKey(ev.ID)); err == nil {
		t.Error("the counter counted an alert as a call")
	}
}

// TestRecentCostDropsWhatSettled: the finished calls' cost counts for
// settle, then leaves the sum, oldest first, however many calls there are.
func TestRecentCostDropsWhatSettled(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	var s scope
	for i := range 10000 {
		at := t0.Add(time.Duration(i) * time.Millisecond)
		s.recent = append(s.recent, ended{cost: 0.001, at: at})
		s.recentSum += 0.001
	}
	for _, tc := range []struct {
		now  time.Duration
		want float64
	}{
		{9999 * time.Millisecond, 5.0}, // the calls of the last 5 s
		{12 * time.Second, 2.999},      // the 2,999 after 7 s
		{15 * time.Second, 0},          // every one settled
	} {
		if got := s.recentCost(t0.Add(tc.now), 5*time.Second); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("at %v: recent cost %v, want %v", tc.now, got, tc.want)
		}
	}
	if s.recent != nil || s.recentSum != 0 {
		t.Errorf("after every call settled: %d calls, sum %v left", len(s.recent), s.recentSum)
	}
}
