package spend

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sluice-gateway/sluice/pkg/auth"
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
