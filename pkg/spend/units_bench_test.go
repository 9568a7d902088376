package spend

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/logevent"
	"github.com/sluice-gateway/sluice/pkg/store"
)

// hourly answers every key as one key of one team with hourly budgets,
// from memory (as auth.Service answers from its cache).
type hourly struct{ p auth.Principal }

func newHourly() hourly {
	b := auth.Budget{BudgetDuration: "1h"}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	return hourly{auth.Principal{TeamID: "t1",
		Key:  &auth.KeyInfo{Token: "tok", TeamID: "t1", CreatedAt: created, Budget: b},
		Team: &auth.Team{TeamID: "t1", CreatedAt: created, Budget: b}}}
}

func (h hourly) PrincipalOf(context.Context, string) (auth.Principal, error) { return h.p, nil }

// BenchmarkUnits is what a flush builds from a handed-over message of 1000
// priced calls before it writes: per op, a message.
func BenchmarkUnits(b *testing.B) {
	c := NewCounter(nil, newHourly(), CounterOptions{})
	at := float64(time.Now().UnixNano()) / 1e9
	events := make([]*logevent.Event, 1000)
	for i := range events {
		id := fmt.Sprint("req-", i)
		events[i] = &logevent.Event{ID: id, Model: "gpt-x", ModelGroup: "gpt", ResponseCost: 0.001, PromptTokens: 10, CompletionTokens: 5,
			StartTime: at, Metadata: logevent.Metadata{UserAPIKeyHash: fmt.Sprint("tok", i%4), UserAPIKeyTeamID: "t1"}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		units, _ := c.units(ctx, []*caller{{name: fmt.Sprint("m", i), events: events}})
		if len(units) != 1 {
			b.Fatal(len(units))
		}
	}
}

// A flush names each budget period once (rowKeys.period), as Period does.
func TestRowsNamePeriodsAsPeriod(t *testing.T) {
	created := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	rows := &rowKeys{}
	for _, duration := range []string{"", "1h", "30s", "1d", "7d", "1mo", "bad"} {
		for _, after := range []time.Duration{-time.Hour, 0, time.Second, 59 * time.Minute, 150 * time.Hour, 4000 * time.Hour} {
			at := created.Add(after)
			want, _ := Period(created, duration, at)
			if got := rows.period(created, duration, at); got != want {
				t.Errorf("%q at %v: %q, want %q", duration, after, got, want)
			}
		}
	}
}

// A record is numbered once a flush whichever place it takes among an
// event's records, however the events alternate (rowKeys.recent).
func TestRowsNumberEachRecordOnce(t *testing.T) {
	rows := &rowKeys{}
	r := rand.New(rand.NewPCG(3, 4))
	byKey := map[store.Key]int32{}
	for range 2000 {
		var a adds
		for range 1 + r.IntN(maxAdds) {
			k := rowKey{kind: []string{"team#", "key#", "model#"}[r.IntN(3)], day: "2026-11-29",
				team: fmt.Sprint("t", r.IntN(2)), sub: fmt.Sprint("s", r.IntN(3))}
			a.add(rows, k, true)
			key := rows.recs[a.rows[a.n-1]]
			if row, ok := byKey[key]; ok && row != a.rows[a.n-1] {
				t.Fatalf("%v: row %d, was %d", key, a.rows[a.n-1], row)
			}
			byKey[key] = a.rows[a.n-1]
			want := dayKey(k.day, k.kind+k.team)
			if k.kind != "team#" {
				want = dayKey(k.day, k.kind+k.team+"#"+k.sub)
			}
			if key != want {
				t.Fatalf("%+v: record %v, want %v", k, key, want)
			}
		}
	}
	if len(rows.recs) != len(byKey) {
		t.Errorf("%d rows for %d records", len(rows.recs), len(byKey))
	}
}
