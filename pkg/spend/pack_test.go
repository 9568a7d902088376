package spend

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluice-gateway/sluice/pkg/store"
)

// pack, summing by row, writes what summing each add by its record's key
// gives: every record's totals, no record twice in a transaction, no
// transaction over the store's bound — over random flushes of events and
// messages, some too large for one transaction.
func TestPackSumsAsByKey(t *testing.T) {
	c := NewCounter(nil, nil, CounterOptions{Now: time.Now})
	r := rand.New(rand.NewPCG(1, 2))
	for flush := range 50 {
		rows := &rowKeys{}
		want := map[store.Key]delta{}
		var units []*unit
		for i := range 1 + r.IntN(60) {
			u := &unit{}
			if r.IntN(4) == 0 {
				u.key, u.message = messageKey(fmt.Sprint(flush, "-", i)), true
			} else if r.IntN(3) > 0 {
				u.key = dedupeKey(fmt.Sprint(flush, "-", i))
			}
			events := 1
			if u.message {
				events = 1 + r.IntN(40)
			}
			for range events {
				// An event's report rows first, then its budget periods.
				a := adds{cost: r.Int64N(1000), input: r.Int64N(100), output: r.Int64N(100)}
				reports := 1 + r.IntN(3)
				for i := range reports + r.IntN(3) {
					k := rowKey{kind: []string{"team#", "key#", "model#"}[r.IntN(3)], day: "2026-11-28",
						team: fmt.Sprint("t", r.IntN(8)), sub: fmt.Sprint("s", r.IntN(30))}
					if i >= reports {
						k.kind = []string{"key:", "team:"}[r.IntN(2)]
					}
					a.add(rows, k, i < reports)
					row := a.rows[i]
					sum := want[rows.recs[row]]
					sum.costOnly = i >= reports
					sum.cost += a.cost
					if i < reports {
						sum.input, sum.output, sum.requests = sum.input+a.input, sum.output+a.output, sum.requests+1
					}
					want[rows.recs[row]] = sum
				}
				u.events = append(u.events, a)
			}
			units = append(units, u)
		}
		got := map[store.Key]map[string]int64{}
		scratch := newPackScratch(rows)
		for len(units) > 0 {
			n, writes := c.pack(units, scratch)
			if n == 0 || len(writes) > store.MaxTransactWrites {
				t.Fatalf("flush %d: pack took %d units in %d writes", flush, n, len(writes))
			}
			inTx := map[store.Key]bool{}
			for _, w := range writes {
				if inTx[w.Record.Key] {
					t.Fatalf("flush %d: %v twice in one transaction", flush, w.Record.Key)
				}
				inTx[w.Record.Key] = true
				if w.Kind != store.WriteAdd {
					continue
				}
				sum := got[w.Record.Key]
				if sum == nil {
					sum = map[string]int64{}
					got[w.Record.Key] = sum
				}
				for k, v := range w.Record.Counters {
					sum[k] += v
				}
			}
			var rest []*unit
			for _, u := range units[:n] {
				if u.message && u.to < len(u.events) {
					u.from = u.to
					rest = append(rest, u)
				}
			}
			units = append(rest, units[n:]...)
		}
		wantCounters := map[store.Key]map[string]int64{}
		for k, d := range want {
			wantCounters[k] = d.counters()
		}
		if diff := cmp.Diff(wantCounters, got); diff != "" {
			t.Fatalf("flush %d: counters (-by key +by row):\n%s", flush, diff)
		}
	}
}
