package spend

import (
	"context"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
	"github.com/sluice-gateway/sluice/pkg/store/local"
)

// benchBudgets is an admission over a fresh local store and a principal
// whose key and team both have a max budget that never refuses, as the
// bench's budget scenario (make bench -scenarios budget).
func benchBudgets(tb testing.TB) (*Budgets, auth.Principal) {
	b, err := local.Open(tb.TempDir(), local.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { b.Close() })
	max := 1e9
	budget := auth.Budget{MaxBudget: &max, BudgetDuration: "30d"}
	created := time.Now().Add(-time.Hour)
	p := auth.Principal{TeamID: "t",
		Key:  &auth.KeyInfo{Token: "tok", CreatedAt: created, Budget: budget},
		Team: &auth.Team{TeamID: "t", CreatedAt: created, Budget: budget}}
	return NewBudgets(b.Records, BudgetOptions{}), p
}

// BenchmarkAdmit is what a budget check costs a call: its admission
// against a key's and a team's budget, and its settlement with its cost.
//
//	go test -run '^$' -bench Admit -benchmem -count 6 ./pkg/spend
func BenchmarkAdmit(b *testing.B) {
	budgets, p := benchBudgets(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		c, err := budgets.Admit(ctx, p)
		if err != nil {
			b.Fatal(err)
		}
		tabOf(c).settleWith(1e-6)
	}
}
